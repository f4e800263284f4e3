"""A container file's content is served inert: as an attachment, with `nosniff` and a CSP that runs nothing, so
an HTML or SVG file that code or a client wrote cannot run script on this server's origin."""

from __future__ import annotations

import httpx
import openai
import pytest


@pytest.mark.parametrize(
    ("name", "data"),
    [("page.html", b"<script>alert(1)</script>"), ("pic.svg", b"<svg onload='alert(1)'/>"), ("x", b"<p>")],
)
def test_a_download_is_an_inert_attachment(client: openai.OpenAI, name: str, data: bytes) -> None:
    c = client.containers.create(name="downloads")
    try:
        up = client.containers.files.create(c.id, file=(name, data))
        url = f"{str(client.base_url).rstrip('/')}/containers/{c.id}/files/{up.id}/content"
        r = httpx.get(url, timeout=10)
        assert r.status_code == 200 and r.content == data
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-security-policy"] == "default-src 'none'; sandbox"
        assert r.headers["content-disposition"].startswith("attachment;")
    finally:
        client.containers.delete(c.id)

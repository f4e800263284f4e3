"""tools/page_text.py: a page's readable text from HTML (standard library parser) or plain text, its charset
found, and what is neither refused."""

from __future__ import annotations

import pytest

from vllm_responses.tools.page_text import NotText, PageText, page_text


def test_html_keeps_the_prose_and_drops_the_rest() -> None:
    html = b"""<html><head><title> A\n Title </title><style>p { x: 1 }</style>
    <script>document.write("<p>scripted</p>")</script></head><body>
    <h2>Head</h2><p>One <a href="/x">link</a> &amp; <b>bold</b>.<br>Next</p>
    <svg><title>icon</title><text>drawn</text></svg><noscript>enable</noscript>
    <table><tr><td>a</td><td>b</td></tr></table><ol><li>item</li></ol><pre>x  y\nz</pre></body></html>"""
    assert page_text(html, "text/html") == PageText(
        "A Title", "## Head\nOne link & bold.\nNext\na b\n- item\nx y\nz"
    )


@pytest.mark.parametrize(
    ("body", "content_type", "text"),
    [
        ("café".encode("latin-1"), "text/plain; charset=ISO-8859-1", "café"),
        (b'<meta charset="windows-1252"><p>caf\xe9</p>', "text/html", "café"),
        # no type: read as HTML when it opens like it, UTF-8 by default
        (b"<p>caf\xc3\xa9</p>", None, "café"),
        (b"plain\r\n\r\n\r\n  text", "", "plain\n\ntext"),
        (b"bad \xff byte", "text/plain; charset=no-such-codec", "bad \ufffd byte"),
    ],
)
def test_charsets_and_plain_text(body: bytes, content_type: str | None, text: str) -> None:
    assert page_text(body, content_type).text == text


@pytest.mark.parametrize("content_type", ["application/pdf", "image/png", "application/json"])
def test_other_types_are_not_read(content_type: str) -> None:
    with pytest.raises(NotText) as caught:
        page_text(b"%PDF-1.4", content_type)
    assert caught.value.media_type == content_type

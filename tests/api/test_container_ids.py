"""Container and container file ids in the path are checked before use: one not of the form this server issues
(`cntr_` / `cfile_` and 24 hex digits) is a 404 in the OpenAI shape, and `..`, `%2F` and the like never reach
the shared sandbox service's URLs (a recording stand-in for it, through the real `HTTPInterpreter`)."""

from __future__ import annotations

import http.client
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from interpreter_service.api import ContainerNotFound
from interpreter_service.service.client import HTTPInterpreter
from tests.support.fakes import FakeEngine
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.store.memory import MemoryStore

GOOD_CID = "cntr_" + "a" * 24
GOOD_FID = "cfile_" + "b" * 24


class Sandbox:
    """The sandbox service's stand-in: it records each request's raw path and knows no container."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.transport = httpx.MockTransport(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.raw_path.decode())
        if request.url.path == "/health":
            return httpx.Response(200, json={})
        error = {"type": "container_not_found", "message": "no such container"}
        return httpx.Response(404, json={"error": error})


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox()


@pytest.fixture(scope="module")
def live(sandbox: Sandbox) -> Iterator[LiveServer]:
    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        interpreter = HTTPInterpreter("http://sandbox.invalid:8765", transport=sandbox.transport)
        store = MemoryStore()
        await interpreter.start()
        await store.open()
        try:
            yield FakeEngine(), interpreter, store
        finally:
            await store.aclose()
            await interpreter.aclose()

    server = LiveServer(Config(), None, None, opener=opener).start()
    yield server
    server.stop()


def send(live: LiveServer, method: str, path: str) -> tuple[int, Any]:
    """One request with `path` sent as written (httpx would resolve its dot segments first)."""
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None)
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


BAD_IDS = ["..", "%2E%2E", ".%2e", "cntr_..", "cntr_%2e%2e", "cntr_a%2Fb", "x", "cntr_" + "g" * 24, "cntr_x"]


@pytest.mark.parametrize("cid", BAD_IDS)
@pytest.mark.parametrize(
    ("method", "tail"), [("GET", ""), ("DELETE", ""), ("GET", "/files"), ("POST", "/files")]
)
def test_a_container_id_not_of_our_form_is_a_404_that_reaches_nothing(
    live: LiveServer, sandbox: Sandbox, cid: str, method: str, tail: str
) -> None:
    before = len(sandbox.paths)
    status, body = send(live, method, f"/v1/containers/{cid}{tail}")
    assert status == 404, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "not_found"
    assert error["param"] == (None if "%2F" in cid else "container_id")  # `/` decoded: no route matches
    assert sandbox.paths[before:] == []


@pytest.mark.parametrize("fid", ["..", "%2E%2E", "cfile_..", "cfile_x", "cfile_" + "A" * 24, "x%2Fy"])
@pytest.mark.parametrize(("method", "tail"), [("GET", ""), ("DELETE", ""), ("GET", "/content")])
def test_a_file_id_not_of_our_form_is_a_404_that_reaches_nothing(
    live: LiveServer, sandbox: Sandbox, fid: str, method: str, tail: str
) -> None:
    before = len(sandbox.paths)
    status, body = send(live, method, f"/v1/containers/{GOOD_CID}/files/{fid}{tail}")
    assert status == 404, body
    error = body["error"]
    assert error["code"] == "not_found" and error["param"] == (None if "%2F" in fid else "file_id")
    assert sandbox.paths[before:] == []


def test_an_id_of_our_form_goes_to_the_service(live: LiveServer, sandbox: Sandbox) -> None:
    before = len(sandbox.paths)
    r = httpx.get(f"{live.base_url}/v1/containers/{GOOD_CID}", timeout=30)
    assert r.status_code == 404 and r.json()["error"]["param"] == "container_id"
    assert sandbox.paths[before:] == [f"/v1/containers/{GOOD_CID}"]


async def test_the_service_client_quotes_a_container_id_as_one_segment() -> None:
    sandbox = Sandbox()
    client = HTTPInterpreter("http://sandbox.invalid:8765", transport=sandbox.transport)
    await client.start()
    try:
        for odd, sent in [("a/b", "/v1/containers/a%2Fb"), ("%2e%2e", "/v1/containers/%252e%252e")]:
            with pytest.raises(ContainerNotFound):
                await client.get_container(odd)
            assert sandbox.paths[-1] == sent
        before = len(sandbox.paths)
        for up in ("..", ".", ""):
            with pytest.raises(ContainerNotFound):
                await client.list_files(up)
        assert sandbox.paths[before:] == []
    finally:
        await client.aclose()

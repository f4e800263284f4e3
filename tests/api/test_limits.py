"""Hostile bodies: too large (413, the rest drained first within bounds), nested too deep or not valid Unicode
(400)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from vllm_responses.api.params import MAX_JSON_DEPTH
from vllm_responses.config import Config

MODEL = "fake-model"
MiB = 1024 * 1024
BIG = 20_000_000  # past the default --max-request-bytes (8 MiB)
JSON = {"Content-Type": "application/json"}


def _head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], dict]:
    """Read one HTTP response (status, headers, JSON body) off a raw socket, sending nothing more."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection without an answer: {data!r}"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in header_lines)}
    while len(rest) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-answer"
        rest += chunk
    return int(status_line.split()[1]), headers, json.loads(rest)


@pytest.fixture
def raw(fake_server: LiveServer) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", fake_server.port), timeout=60)
    yield sock
    sock.close()


def test_a_content_length_past_the_limit_is_refused_before_the_body(raw: socket.socket) -> None:
    # past what is drained before the answer (4 x the limit, at least 64 MiB): answered without reading on
    raw.sendall(_head("/v1/responses", f"Content-Length: {1 << 30}") + b'{"model": "fake-model", "input": "')
    status, headers, body = _answer(raw)  # nothing more is sent: the answer comes without the body
    assert status == 413 and headers["connection"] == "close"
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == "body"
    assert body["error"]["code"] == "request_too_large" and "8 MiB" in body["error"]["message"]


def test_a_chunked_body_is_refused_once_it_passes_the_limit(raw: socket.socket) -> None:
    raw.sendall(_head("/v1/responses", "Transfer-Encoding: chunked"))
    piece = b" " * MiB
    for _ in range(8):  # exactly the limit: not refused yet
        raw.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
    raw.sendall(b"1\r\n \r\n")  # one byte past it
    raw.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(piece), piece))  # the rest is read and dropped
    status, headers, body = _answer(raw)
    assert status == 413 and headers["connection"] == "close"
    assert body["error"]["code"] == "request_too_large"


def test_http_clients_get_the_413_for_both_kinds_of_body(fake_server: LiveServer, engine: FakeEngine) -> None:
    url = fake_server.base_url + "/v1/responses"
    sized = httpx.post(url, content=b" " * BIG, headers=JSON, timeout=60)  # Content-Length
    assert sized.status_code == 413, sized.text
    assert sized.json()["error"]["code"] == "request_too_large"

    def chunks() -> Iterator[bytes]:
        for _ in range(BIG // MiB):
            yield b" " * MiB

    chunked = httpx.post(url, content=chunks(), headers=JSON, timeout=60)  # Transfer-Encoding: chunked
    assert chunked.status_code == 413, chunked.text
    client = openai.OpenAI(base_url=fake_server.base_url + "/v1", api_key="-", max_retries=0, timeout=60)
    with pytest.raises(openai.APIStatusError) as err:
        client.responses.create(model=MODEL, input="x" * BIG)
    assert err.value.status_code == 413
    assert engine.requests == []
    # the server is fine afterwards, and a body just under the limit is read and validated as usual
    ok = httpx.post(url, json={"model": MODEL, "input": "hi", "metadata": {"pad": "x"}}, timeout=30)
    assert ok.status_code == 200, ok.text
    near = httpx.post(url, json={"model": MODEL, "input": "y" * (7 * MiB)}, timeout=60)
    assert near.status_code == 200, near.text


def test_every_body_is_bounded_not_only_creates(fake_server: LiveServer) -> None:
    for path in ("/v1/conversations", "/v1/responses/input_tokens", "/v1/containers"):
        r = httpx.post(fake_server.base_url + path, content=b" " * BIG, headers=JSON, timeout=60)
        assert r.status_code == 413, (path, r.text)


@pytest.fixture(scope="module")
def small() -> Iterator[LiveServer]:
    """A server with small limits: 64 KiB bodies, 256 KiB uploads."""
    config = Config(max_request_bytes=64 * 1024, max_upload_bytes=256 * 1024)
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


def test_uploads_have_their_own_larger_limit(small: LiveServer) -> None:
    client = openai.OpenAI(base_url=small.base_url + "/v1", api_key="-", max_retries=0, timeout=60)
    cid = client.containers.create(name="up").id
    fits = client.containers.files.create(cid, file=("fits.bin", b"a" * (256 * 1024)))  # > 64 KiB: fine
    assert fits.bytes == 256 * 1024
    for size in (256 * 1024 + 1, 4 * MiB):  # one byte over (within the multipart slack), and far over
        with pytest.raises(openai.APIStatusError) as err:
            client.containers.files.create(cid, file=("big.bin", b"b" * size))
        assert err.value.status_code == 413
        assert err.value.body["code"] == "file_too_large" and err.value.body["param"] == "file"  # type: ignore[index]
    assert [f.path for f in client.containers.files.list(cid)] == ["/mnt/data/fits.bin"]
    # a JSON body on the same server keeps the smaller limit
    r = httpx.post(small.base_url + "/v1/responses", json={"model": MODEL, "input": "z" * 70_000}, timeout=30)
    assert r.status_code == 413 and "64 KiB" in r.json()["error"]["message"]


def test_a_chunked_upload_is_bounded_while_it_streams(small: LiveServer) -> None:
    cid = httpx.post(small.base_url + "/v1/containers", json={"name": "c"}, timeout=10).json()["id"]
    boundary = "xyz"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()

    def body() -> Iterator[bytes]:
        yield head
        for _ in range(64):  # 4 MiB, never terminated: refused long before
            yield b"c" * 65536

    r = httpx.post(
        f"{small.base_url}/v1/containers/{cid}/files",
        content=body(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        timeout=60,
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "file_too_large"


# --- nesting and Unicode ---------------------------------------------------------------------------------


def _post(server: LiveServer, content: bytes, path: str = "/v1/responses") -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return httpx.post(server.base_url + path, content=content, headers=headers, timeout=30)


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deep_nesting_is_a_400_not_a_500(fake_server: LiveServer, opener: str) -> None:
    for depth in (100_000, 5_000, MAX_JSON_DEPTH + 1):
        r = _post(fake_server, (opener * depth + "1" + ("]" if opener == "[" else "}") * depth).encode())
        assert r.status_code == 400, (depth, r.text)
        err = r.json()["error"]
        assert (
            err["code"] == "invalid_json" and err["param"] == "body" and str(MAX_JSON_DEPTH) in err["message"]
        )
    unclosed = _post(fake_server, (opener * 100_000).encode())
    assert unclosed.status_code == 400 and unclosed.json()["error"]["code"] == "invalid_json"


def test_nesting_a_real_request_needs_is_accepted(fake_server: LiveServer, engine: FakeEngine) -> None:
    schema: dict = {"type": "string"}
    for _ in range(40):  # a function schema 40 objects deep: ~80 levels of JSON under the body's own
        schema = {"type": "object", "properties": {"x": schema}}
    tool = {"type": "function", "name": "deep", "parameters": schema}
    r = httpx.post(
        fake_server.base_url + "/v1/responses",
        json={"model": MODEL, "input": "hi", "tools": [tool]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    too_deep = {"model": MODEL, "input": "hi", "metadata": {"k": "v"}, "tools": [tool]}
    for _ in range(30):
        too_deep["tools"][0]["parameters"] = {
            "type": "object",
            "properties": {"x": too_deep["tools"][0]["parameters"]},
        }
    r = httpx.post(fake_server.base_url + "/v1/responses", json=too_deep, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


def test_nesting_is_bounded_on_every_json_route(fake_server: LiveServer) -> None:
    deep = b"[" * 100_000
    for path in (
        "/v1/conversations",
        "/v1/responses/input_tokens",
        "/v1/responses/compact",
        "/v1/containers",
    ):
        r = _post(fake_server, deep, path)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json", (path, r.text)


LONE = [
    (b'{"model": "fake-model", "input": "a \\ud800 b"}', "input"),
    (b'{"model": "fake-model", "input": [{"role": "user", "content": "\\udfff"}]}', "input[0].content"),
    (b'{"model": "fake-model", "input": "hi", "metadata": {"k": "x\\udc00"}}', "metadata.k"),
    (b'{"model": "fake-model", "input": "hi", "metadata": {"\\ud83d": "v"}}', "metadata"),
    (b'{"model": "fake-model", "input": "hi", "instructions": "\\ude00\\ud83d"}', "instructions"),  # reversed
]


@pytest.mark.parametrize("body,param", LONE, ids=[p for _b, p in LONE])
def test_text_that_is_not_unicode_is_a_400_naming_it(
    fake_server: LiveServer, engine: FakeEngine, body: bytes, param: str
) -> None:
    r = _post(fake_server, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["code"] == "invalid_value" and "surrogate" in err["message"]
    assert engine.requests == []


def test_surrogate_pairs_and_raw_utf8_are_text(fake_server: LiveServer, engine: FakeEngine) -> None:
    paired = _post(fake_server, b'{"model": "fake-model", "input": "smile \\ud83d\\ude00"}')
    assert paired.status_code == 200, paired.text
    raw = _post(fake_server, '{"model": "fake-model", "input": "smile 😀 é"}'.encode())
    assert raw.status_code == 200, raw.text
    not_utf8 = _post(fake_server, b'{"model": "fake-model", "input": "\xed\xa0\x80"}')  # a surrogate, encoded
    assert not_utf8.status_code == 400 and not_utf8.json()["error"]["code"] == "invalid_json"
    latin1 = _post(fake_server, b'{"model": "fake-model", "input": "caf\xe9"}')
    assert latin1.status_code == 400 and "UTF-8" in latin1.json()["error"]["message"]


def test_websocket_messages_get_the_same_checks(fake_server: LiveServer, engine: FakeEngine) -> None:
    from websockets.sync.client import connect

    from tests.api.test_websocket import create, one_response, recv, ws_url

    with connect(ws_url(fake_server), max_size=None) as ws:
        ws.send("[" * 100_000)
        err = recv(ws)
        assert err["type"] == "error" and err["status"] == 400 and err["error"]["code"] == "invalid_json"
        ws.send('{"type": "response.create", "model": "fake-model", "input": "\\ud800"}')
        err = recv(ws)
        assert err["error"]["param"] == "input" and "surrogate" in err["error"]["message"]
        create(ws, model=MODEL, input="still here")  # the connection stays usable
        assert one_response(ws)[-1]["type"] == "response.completed"

"""The front door on live servers: Host and Origin checks (HTTP and WebSocket), JSON only as JSON, a 413 the
client can read, and /metrics and /ready's detail behind the operator key."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from vllm_responses.api import middleware
from vllm_responses.api.hosts import allowed_hosts, cors_origins, host_allowed, origin_allowed
from vllm_responses.config import Config

MODEL = "fake-model"
MiB = 1024 * 1024
BIG = 20_000_000  # past the default --max-request-bytes (8 MiB), within what is drained (64 MiB)
JSON = {"Content-Type": "application/json"}


def _error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == code, err
    return err


def _ws_refusal(url: str, port: int, **options: Any) -> InvalidStatus:
    """The refusal of a WebSocket upgrade to `url`, connected to 127.0.0.1:`port` whatever its host."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    with pytest.raises(InvalidStatus) as refused:
        connect(url, sock=sock, open_timeout=10, **options)
    sock.close()
    return refused.value


@pytest.fixture(scope="module")
def listed() -> Iterator[LiveServer]:
    """A server named api.example.com that app.example.com's pages may call."""
    config = Config(allowed_hosts=("api.example.com",), allowed_origins=("https://app.example.com",))
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


# --- Host (DNS rebinding) ------------------------------------------------------------------------------


def test_a_foreign_host_is_refused_over_http(fake_server: LiveServer, engine: FakeEngine) -> None:
    evil = {"Host": f"rebind.evil.example:{fake_server.port}"}
    err = _error(httpx.get(fake_server.base_url + "/v1/models", headers=evil), 400, "host_not_allowed")
    assert err["type"] == "invalid_request_error" and "--allowed-hosts" in err["message"]
    r = httpx.post(fake_server.base_url + "/v1/responses", json={"model": MODEL, "input": "hi"}, headers=evil)
    _error(r, 400, "host_not_allowed")
    _error(httpx.get(fake_server.base_url + "/metrics", headers=evil), 400, "host_not_allowed")
    _error(httpx.get(fake_server.base_url + "/", headers=evil), 400, "host_not_allowed")  # the playground
    assert engine.requests == []
    # the probes answer whatever the Host (the pod's IP); the loopback names pass
    assert httpx.get(fake_server.base_url + "/health", headers=evil).status_code == 200
    assert httpx.get(fake_server.base_url + "/ready", headers=evil).status_code in (200, 503)
    for name in ("localhost", "127.0.0.1", "[::1]", "LOCALHOST."):
        r = httpx.get(fake_server.base_url + "/v1/models", headers={"Host": f"{name}:{fake_server.port}"})
        assert r.status_code == 200, (name, r.text)


def test_a_foreign_host_is_refused_over_websocket(fake_server: LiveServer) -> None:
    port = fake_server.port
    refusal = _ws_refusal(f"ws://rebind.evil.example:{port}/v1/responses", port)
    assert refusal.response.status_code == 400
    assert json.loads(refusal.response.body)["error"]["code"] == "host_not_allowed"
    with connect(f"ws://localhost:{port}/v1/responses", sock=socket.create_connection(("127.0.0.1", port))):
        pass  # a loopback name is served


def test_allowed_hosts_replace_the_defaults(listed: LiveServer) -> None:
    url = listed.base_url + "/v1/models"
    assert httpx.get(url, headers={"Host": "api.example.com"}).status_code == 200
    assert httpx.get(url, headers={"Host": "API.example.com:8443"}).status_code == 200  # any port
    _error(httpx.get(url, headers={"Host": "other.example.com"}), 400, "host_not_allowed")
    _error(httpx.get(url), 400, "host_not_allowed")  # 127.0.0.1: not listed
    assert httpx.get(listed.base_url + "/health").status_code == 200


def test_host_patterns() -> None:
    hosts = allowed_hosts(Config(host="0.0.0.0"))
    assert hosts == {("localhost", None), ("127.0.0.1", None), ("::1", None)}
    assert ("10.1.2.3", None) in (allowed_hosts(Config(host="10.1.2.3")) or ())
    pinned = allowed_hosts(Config(allowed_hosts=("a.example:8000", "b.example")))
    assert host_allowed("a.example:8000", pinned) and not host_allowed("a.example:9000", pinned)
    assert not host_allowed("a.example", pinned) and host_allowed("b.example:1", pinned)
    assert not host_allowed("", pinned) and not host_allowed("b.example:x", pinned)
    assert allowed_hosts(Config(allowed_hosts=("*",))) is None and host_allowed("anything", None)


# --- Origin (CSRF, cross-site WebSocket) ------------------------------------------------------------------


def test_a_cross_site_post_is_refused(fake_server: LiveServer, engine: FakeEngine) -> None:
    url, body = fake_server.base_url + "/v1/responses", {"model": MODEL, "input": "hi"}
    for origin in ("https://evil.example", "null", f"http://127.0.0.1:{fake_server.port + 1}", "junk"):
        err = _error(httpx.post(url, json=body, headers={"Origin": origin}), 403, "origin_not_allowed")
        assert err["type"] == "invalid_request_error" and "--allowed-origins" in err["message"]
    assert engine.requests == []
    # the server's own pages (the playground) are same-origin; clients that are not browsers send none
    assert httpx.post(url, json=body, headers={"Origin": fake_server.base_url}).status_code == 200
    own = {"Origin": f"http://localhost:{fake_server.port}", "Host": f"localhost:{fake_server.port}"}
    assert httpx.post(url, json=body, headers=own).status_code == 200
    assert httpx.post(url, json=body).status_code == 200


def test_a_cross_site_websocket_is_refused_before_it_opens(fake_server: LiveServer) -> None:
    port, url = fake_server.port, f"ws://127.0.0.1:{fake_server.port}/v1/responses"
    for origin in ("https://evil.example", "null"):
        refusal = _ws_refusal(url, port, origin=origin)
        assert refusal.response.status_code == 403
        assert json.loads(refusal.response.body)["error"]["code"] == "origin_not_allowed"
    with connect(url, origin=f"http://127.0.0.1:{port}", open_timeout=10) as ws:  # type: ignore[arg-type]
        ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "hi"}))
        assert json.loads(ws.recv(timeout=30))["type"] == "response.created"  # same-origin: served


def test_allowed_origins(listed: LiveServer) -> None:
    url, host = listed.base_url + "/v1/models", {"Host": "api.example.com"}
    assert httpx.get(url, headers={**host, "Origin": "https://app.example.com"}).status_code == 200
    assert httpx.get(url, headers={**host, "Origin": "https://api.example.com"}).status_code == 200  # own
    for origin in ("http://app.example.com", "https://app.example.com:8443", "https://evil.example"):
        _error(httpx.get(url, headers={**host, "Origin": origin}), 403, "origin_not_allowed")
    # the listed origin's pages can call for real: their JSON POSTs' preflights are answered (CORS)
    app = {**host, "Origin": "https://app.example.com"}
    asks = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    preflight = httpx.options(listed.base_url + "/v1/responses", headers={**app, **asks})
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    r = httpx.post(listed.base_url + "/v1/responses", json={"model": MODEL, "input": "hi"}, headers=app)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example.com"


def test_origin_rules() -> None:
    assert origin_allowed("https://a.example", "a.example", ())  # default ports
    assert origin_allowed("http://a.example:8000", "a.example:8000", ())
    assert not origin_allowed("http://a.example:8000", "a.example", ())
    assert not origin_allowed("https://b.example", "a.example", ())
    assert origin_allowed("https://b.example", "a.example", ("*",))
    assert not origin_allowed("null", "a.example", ("*",))
    assert origin_allowed("https://B.example/", "a.example", ("https://b.example:443",))
    listed = ("https://B.example:443/", "http://[::1]:8000", "*")
    assert cors_origins(listed) == ["https://b.example", "http://[::1]:8000", "*"]


# --- JSON only as JSON -------------------------------------------------------------------------------


def _json_routes(base: str) -> list[tuple[str, dict[str, Any]]]:
    conversation = httpx.post(base + "/v1/conversations", json={}, timeout=10).json()["id"]
    item = {"type": "message", "role": "user", "content": "hi"}
    return [
        ("/v1/responses", {"model": MODEL, "input": "hi"}),
        ("/v1/responses/input_tokens", {"model": MODEL, "input": "hi"}),
        ("/v1/responses/compact", {"model": MODEL, "input": "hi"}),
        ("/v1/conversations", {}),
        (f"/v1/conversations/{conversation}", {"metadata": {"a": "b"}}),
        (f"/v1/conversations/{conversation}/items", {"items": [item]}),
        ("/v1/containers", {"name": "c"}),
    ]


def test_a_json_body_needs_the_json_content_type(fake_server: LiveServer, engine: FakeEngine) -> None:
    base = fake_server.base_url
    routes = _json_routes(base)
    simple = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None)
    for path, body in routes:
        for ctype in simple:  # what a web page may send cross-site without asking first
            headers = {"Content-Type": ctype} if ctype else {}
            r = httpx.post(base + path, content=json.dumps(body), headers=headers, timeout=30)
            err = _error(r, 415, "unsupported_media_type")
            assert err["type"] == "invalid_request_error" and "application/json" in err["message"]
    assert engine.requests == []
    for ctype in ("application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"):
        for path, body in routes:
            r = httpx.post(base + path, content=json.dumps(body), headers={"Content-Type": ctype}, timeout=30)
            assert r.status_code == 200, (path, ctype, r.text)


# --- a 413 the client reads ------------------------------------------------------------------------------


def _post_whole(port: int, body: bytes | Iterator[bytes]) -> tuple[int, dict[str, Any]]:
    """POST the whole body, then read the answer, as http.client (and urllib3) do: the server must read the
    body (or its answer is lost in a reset)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            "POST", "/v1/responses", body=body, headers=JSON, encode_chunked=not isinstance(body, bytes)
        )
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def test_a_client_sending_a_whole_oversized_body_reads_the_413(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    status, body = _post_whole(fake_server.port, b" " * BIG)  # Content-Length
    assert status == 413 and body["error"]["code"] == "request_too_large", body
    status, body = _post_whole(fake_server.port, (b" " * MiB for _ in range(BIG // MiB)))  # chunked
    assert status == 413 and body["error"]["code"] == "request_too_large", body
    for content in (b" " * BIG, (b" " * MiB for _ in range(BIG // MiB))):  # httpx too
        r = httpx.post(fake_server.base_url + "/v1/responses", content=content, headers=JSON, timeout=60)
        _error(r, 413, "request_too_large")
    assert engine.requests == []


def test_a_client_that_stops_sending_gets_the_413_after_the_drain_time(
    fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(middleware, "DRAIN_S", 0.5)
    with socket.create_connection(("127.0.0.1", fake_server.port), timeout=30) as sock:
        head = f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {BIG}\r\n"
        sock.sendall((head + "Content-Type: application/json\r\n\r\n").encode() + b" " * MiB)
        started = time.monotonic()
        answer = sock.recv(65536)  # nothing more is sent
        assert answer.startswith(b"HTTP/1.1 413"), answer
        assert 0.3 < time.monotonic() - started < 10


# --- /metrics and /ready's detail ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed() -> Iterator[LiveServer]:
    server = LiveServer(Config(api_key="client-key"), FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def operated() -> Iterator[LiveServer]:
    config = Config(api_key="client-key", operator_key="ops-key")
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _check_ops(server: LiveServer, good: str, bad: tuple[str, ...]) -> None:
    base = server.base_url
    for key in bad:
        headers = _bearer(key) if key else {}
        err = _error(httpx.get(base + "/metrics", headers=headers), 401, "invalid_api_key")
        assert err["type"] == "authentication_error"
        bare = httpx.get(base + "/ready", headers=headers)
        assert bare.json() == {"status": "ready" if bare.status_code == 200 else "unavailable"}
    r = httpx.get(base + "/metrics", headers=_bearer(good))
    assert r.status_code == 200 and "vllm_responses_" in r.text
    full = httpx.get(base + "/ready", headers=_bearer(good))
    assert set(full.json()) == {"status", "checks"}
    assert set(full.json()["checks"]) == {"server", "engine", "store", "sandbox"}
    assert httpx.get(base + "/health").json() == {"status": "ok"}


def test_ops_need_the_api_key_when_no_operator_key(keyed: LiveServer) -> None:
    _check_ops(keyed, "client-key", ("", "wrong"))


def test_ops_need_the_operator_key_when_there_is_one(operated: LiveServer) -> None:
    _check_ops(operated, "ops-key", ("", "client-key", "wrong"))


def test_ops_are_open_with_no_key(fake_server: LiveServer) -> None:
    assert httpx.get(fake_server.base_url + "/metrics").status_code == 200
    assert "checks" in httpx.get(fake_server.base_url + "/ready").json()

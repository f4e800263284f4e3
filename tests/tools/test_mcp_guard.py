"""The guard on the MCP server URLs clients name, against a live server and real listeners on 127.0.0.1: URLs
normalised before they are matched and sent as normalised, `Host` and hop-by-hop headers refused, `*` kept off
loopback and private addresses (one error text, open port or closed), and connections pinned to the address
that was checked."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.mcp_server import McpTestServer
from tests.support.serving import LiveServer, free_port
from vllm_responses.config import Config

MODEL = "fake-model"


class Listener:
    """A plain HTTP listener on 127.0.0.1 that records each request's path and headers and answers 404."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def serve(**config: Any) -> LiveServer:
    return LiveServer(Config(mcp_timeout=3.0, **config), FakeEngine(), FakeInterpreter()).start()


def post(live: LiveServer, url: str, **extra: Any) -> httpx.Response:
    live.engine.reset(say("ok"))  # type: ignore[attr-defined]
    tool = {"type": "mcp", "server_label": "s", "server_url": url, "require_approval": "never", **extra}
    body = {"model": MODEL, "input": "hi", "tools": [tool]}
    return httpx.post(live.base_url + "/v1/responses", json=body, timeout=60)


def listing_error(r: httpx.Response) -> str | None:
    assert r.status_code == 200, r.text
    item = r.json()["output"][0]
    assert item["type"] == "mcp_list_tools"
    return item.get("error")


def refused(r: httpx.Response) -> str:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "tools[0].server_url" and error["type"] == "invalid_request_error"
    return str(error["message"])


def test_dot_segments_and_encodings_cannot_leave_the_allowed_path(listener: Listener) -> None:
    base = f"http://127.0.0.1:{listener.port}"
    live = serve(mcp_allowed_urls=(f"{base}/mcp",))
    try:
        for url in (
            f"{base}/mcp/../admin",
            f"{base}/mcp/%2e%2e/admin",
            f"{base}/mcp/.%2E/admin",
            f"{base}/mcp%2F..%2Fadmin",
            f"{base}/mcp/..%2fadmin",
            f"{base}\\mcp/../admin",
            f"http://127.0.0.1:{listener.port}@127.0.0.1:{listener.port}/mcp",
            f"{base}/mcp#../admin",
        ):
            refused(post(live, url))
        assert listener.seen == []  # nothing was sent for any of them
        # allowed once normalised, and sent as normalised: the listener gets exactly the allowed path
        for url in (
            f"{base}/mcp/x/%2e%2e/y",
            f"{base}/mcp/./x/../y",
            f"HTTP://127.0.0.1:{listener.port}/mcp/%7Ey",
        ):
            listing_error(post(live, url))
        assert {path for path, _ in listener.seen} == {"/mcp/y", "/mcp/~y"}  # (streamable HTTP, then SSE)
    finally:
        live.stop()


@pytest.mark.parametrize(
    "name", ["Host", "host", "Connection", "Keep-Alive", "Proxy-Authorization", "TE", "Trailer",
             "Transfer-Encoding", "Upgrade", "Content-Length"]
)  # fmt: skip
def test_host_and_hop_by_hop_headers_are_a_400(listener: Listener, name: str) -> None:
    live = serve(mcp_allowed_urls=(f"http://127.0.0.1:{listener.port}/mcp",))
    try:
        r = post(live, f"http://127.0.0.1:{listener.port}/mcp", headers={name: "evil.example"})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "tools[0].headers"
        r = post(live, f"http://127.0.0.1:{listener.port}/mcp", headers={"X-Bad": "a\r\nHost: evil"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "tools[0].headers"
        assert listener.seen == []
        # Authorization is what headers are for
        listing_error(
            post(live, f"http://127.0.0.1:{listener.port}/mcp", headers={"Authorization": "Bearer t"})
        )
        assert listener.seen[-1][1]["authorization"] == "Bearer t"
        assert listener.seen[-1][1]["host"] == f"127.0.0.1:{listener.port}"
    finally:
        live.stop()


def test_the_star_does_not_reach_loopback_private_or_link_local_addresses(listener: Listener) -> None:
    closed = free_port()
    live = serve(mcp_allowed_urls=("*",))
    try:
        texts = set()
        for url in (
            f"http://127.0.0.1:{listener.port}/mcp",
            f"http://127.0.0.1:{closed}/mcp",
            f"http://[::ffff:127.0.0.1]:{listener.port}/mcp",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/mcp",
            "http://100.64.0.1/mcp",
            "http://[fe80::1]/mcp",
            "http://[fd00::1]/mcp",
            "http://0.0.0.0/mcp",
        ):
            texts.add(refused(post(live, url)).replace(url, "URL"))
        assert len(texts) == 1  # before any connection, the same text whatever is (not) listening there
        # a name that resolves to loopback is refused when it is resolved, again before any connection
        errors = {
            listing_error(post(live, f"http://localhost:{port}/mcp")) for port in (listener.port, closed)
        }
        assert errors == {"Could not connect to the MCP server 's'."}
        assert listener.seen == []
    finally:
        live.stop()


def test_an_explicit_loopback_prefix_works_end_to_end(mcp_server: McpTestServer) -> None:
    live = serve(mcp_allowed_urls=("*", mcp_server.url))
    try:
        r = post(live, mcp_server.url)
        assert listing_error(r) is None
        assert [t["name"] for t in r.json()["output"][0]["tools"]] == ["add", "fail", "slow", "whoami"]
    finally:
        live.stop()


@pytest.fixture
def made_up_name(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`rebind.test` resolves to 127.0.0.1 the first time it is asked and to 127.0.0.2 (where nothing listens)
    every time after, a DNS rebinding that stays on this machine; other names as usual. The list records each
    time it was asked."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def stub(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = "127.0.0.1" if len(asked) == 1 else "127.0.0.2"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", stub)
    return asked


def test_the_connection_goes_to_the_checked_address(listener: Listener, made_up_name: list[str]) -> None:
    live = serve(mcp_allowed_urls=("*",), mcp_allow_private_networks=True)
    try:
        assert listing_error(post(live, f"http://rebind.test:{listener.port}/mcp")) is not None  # 404
        assert made_up_name == ["rebind.test"]  # resolved once, by the guard; the connection was not
        assert {(p, h["host"]) for p, h in listener.seen} == {("/mcp", f"rebind.test:{listener.port}")}
    finally:
        live.stop()


def test_a_name_that_resolves_to_loopback_is_refused(listener: Listener, made_up_name: list[str]) -> None:
    live = serve(mcp_allowed_urls=("*",))
    try:
        error = listing_error(post(live, f"http://rebind.test:{listener.port}/mcp"))
        assert error == "Could not connect to the MCP server 's'."
        assert listener.seen == []
    finally:
        live.stop()


class Silent:
    """A TCP listener on 127.0.0.1 that accepts and then closes at once (`hang=False`) or says nothing."""

    def __init__(self, hang: bool) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []

        def run() -> None:
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                if hang:
                    self.held.append(conn)
                else:
                    conn.close()

        threading.Thread(target=run, daemon=True).start()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_server_that_cannot_be_reached_reads_the_same_however_it_fails() -> None:
    closed, resets, hangs = free_port(), Silent(hang=False), Silent(hang=True)
    ports = (closed, resets.port, hangs.port)
    live = serve(mcp_allowed_urls=tuple(f"http://127.0.0.1:{p}/mcp" for p in ports))
    try:
        errors = {listing_error(post(live, f"http://127.0.0.1:{p}/mcp")) for p in ports}
        assert errors == {"Could not connect to the MCP server 's'."}  # no refused / reset / timed out
    finally:
        live.stop()
        resets.close()
        hangs.close()

"""Work a caller starts outside the model's admission, bounded over a real server (uvicorn on 127.0.0.1, the
scripted engine): a large custom-tool grammar is checked off the event loop (other requests answer meanwhile),
past `--max-grammar-bytes` or `--grammar-compile-timeout` it is a 400; `input_tokens` and a WebSocket
`generate: false` create are admitted as responses are (429 past the limits); WebSocket connections are capped
in all and per caller (429 before the upgrade), a freed place taken again."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.support.fakes import FakeEngine
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.service.admission import Admission

MODEL = "fake-model"
GRAMMAR_LIMIT = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    config = Config(
        max_concurrent_responses=1,
        max_queued_responses=0,
        max_grammar_bytes=GRAMMAR_LIMIT,  # room for a grammar that takes seconds to convert
        max_websockets=2,
        code_interpreter=False,
    )
    live = LiveServer(config, FakeEngine(), None, db=":memory:").start()
    yield live
    live.stop()


@pytest.fixture
def engine(server: LiveServer) -> Iterator[FakeEngine]:
    fake: FakeEngine = server.engine
    fake.reset()
    yield fake
    if fake.hold is not None:
        fake.hold.set()


def admission(server: LiveServer) -> Admission:
    adm: Admission = server.app.state.vr.service.admission
    return adm


def eventually(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def grammar_tool(syntax: str, definition: str) -> dict[str, Any]:
    return {
        "type": "custom",
        "name": "words",
        "format": {"type": "grammar", "syntax": syntax, "definition": definition},
    }


def slow_regex(words: int = 45_000) -> str:
    """A regex of ~0.9 MB that xgrammar takes 0.7 s or more to parse (30 000 words took 0.49 s on a quick
    AVX-512 host, under the test's 0.5 s floor); new each time (conversions are cached)."""
    tag = uuid.uuid4().hex[:8]
    return "(" + "|".join(f"{tag}{i}[a-z]{{1,3}}" for i in range(words)) + ")"


def create(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        server.base_url + "/v1/responses", json={"model": MODEL, "input": "hi", **body}, timeout=120
    )


def test_other_requests_answer_while_a_large_grammar_is_checked(
    server: LiveServer, engine: FakeEngine
) -> None:
    assert (
        create(server, {"tools": [grammar_tool("regex", "[a-z]+")]}).status_code == 200
    )  # xgrammar imported
    result: dict[str, Any] = {}

    def heavy() -> None:
        began = time.monotonic()
        result["status"] = create(server, {"tools": [grammar_tool("regex", slow_regex())]}).status_code
        result["elapsed"] = time.monotonic() - began

    worker = threading.Thread(target=heavy)
    worker.start()
    worst = 0.0
    with httpx.Client(base_url=server.base_url, timeout=120) as probe:
        while worker.is_alive():
            began = time.monotonic()
            assert probe.get("/health").status_code == 200
            worst = max(worst, time.monotonic() - began)
            time.sleep(0.1)
    worker.join()
    assert result["status"] == 200
    assert result["elapsed"] > 0.5, "the grammar was not slow to check: the test proves nothing"
    # On the event loop, /health waited for the whole conversion (worst ~ elapsed); off it, milliseconds.
    assert worst < result["elapsed"] / 4, (worst, result["elapsed"])


@pytest.mark.parametrize("syntax", ["regex", "lark"])
def test_a_grammar_past_the_size_limit_is_a_400(server: LiveServer, engine: FakeEngine, syntax: str) -> None:
    definition = "a" * (GRAMMAR_LIMIT + 1) if syntax == "regex" else 'start: "' + "a" * GRAMMAR_LIMIT + '"'
    r = create(server, {"tools": [{"type": "function", "name": "f"}, grammar_tool(syntax, definition)]})
    assert r.status_code == 400, r.text[:300]
    error = r.json()["error"]
    assert error["param"] == "tools[1].format.definition"
    assert error["code"] == "grammar_too_large" and "--max-grammar-bytes" in error["message"]
    assert engine.requests == []


def test_a_grammar_past_the_compile_timeout_is_a_400() -> None:
    config = Config(max_grammar_bytes=GRAMMAR_LIMIT, grammar_compile_timeout=0.2, code_interpreter=False)
    live = LiveServer(config, FakeEngine(), None, db=":memory:").start()
    try:
        r = create(live, {"tools": [grammar_tool("regex", slow_regex())]})
    finally:
        live.stop()
    assert r.status_code == 400, r.text[:300]
    error = r.json()["error"]
    assert error["param"] == "tools[0].format.definition"
    assert error["code"] == "grammar_too_complex" and "--grammar-compile-timeout" in error["message"]
    assert live.engine.requests == []


def test_the_grammar_defaults() -> None:
    config = Config()
    assert config.max_grammar_bytes == 64 * 1024 and config.grammar_compile_timeout == 10.0
    assert (config.max_websockets, config.max_websockets_per_key) == (256, 32)


def hold_the_only_slot(server: LiveServer, engine: FakeEngine) -> threading.Event:
    """A background response holding the server's one slot until the returned event is set."""
    engine.hold = hold = threading.Event()
    r = create(server, {"background": True})
    assert r.status_code == 200, r.text
    eventually(lambda: admission(server).running == 1)
    return hold


def test_input_tokens_and_compact_are_admitted(server: LiveServer, engine: FakeEngine) -> None:
    hold = hold_the_only_slot(server, engine)
    body = {"model": MODEL, "input": "x " * 200_000}  # a request-sized input to render and tokenize
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        counts = [client.post("/v1/responses/input_tokens", json=body) for _ in range(5)]
        compacts = [client.post("/v1/responses/compact", json=body) for _ in range(3)]
        for r in counts + compacts:
            assert r.status_code == 429, r.text[:300]
            assert r.json()["error"]["code"] == "rate_limit_exceeded" and int(r.headers["retry-after"]) >= 1
        hold.set()
        eventually(lambda: admission(server).running == 0)
        r = client.post("/v1/responses/input_tokens", json=body)
        assert r.status_code == 200 and r.json()["input_tokens"] > 0
    assert admission(server).running == 0  # the count gave its slot back


def ws_url(server: LiveServer) -> str:
    return server.base_url.replace("http://", "ws://") + "/v1/responses"


def test_a_websocket_create_without_generation_is_admitted(server: LiveServer, engine: FakeEngine) -> None:
    hold = hold_the_only_slot(server, engine)
    with connect(ws_url(server), open_timeout=10) as ws:
        ws.send(
            json.dumps({"type": "response.create", "model": MODEL, "input": "warm up", "generate": False})
        )
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] == "error" and event["status"] == 429, event
        assert event["error"]["code"] == "rate_limit_exceeded"
        hold.set()
        eventually(lambda: admission(server).running == 0)
        ws.send(
            json.dumps({"type": "response.create", "model": MODEL, "input": "warm up", "generate": False})
        )
        types = []
        while not types or types[-1] != "response.completed":
            types.append(json.loads(ws.recv(timeout=30))["type"])
    eventually(lambda: admission(server).running == 0)


def refused(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    with pytest.raises(InvalidStatus) as caught:
        connect(url, open_timeout=10, additional_headers=headers)
    assert caught.value.response.status_code == 429
    body: dict[str, Any] = json.loads(caught.value.response.body or b"{}")
    return body["error"]


def test_websocket_connections_are_capped(server: LiveServer) -> None:
    url = ws_url(server)
    opened: list[ClientConnection] = [connect(url, open_timeout=10) for _ in range(2)]
    try:
        error = refused(url)
        assert error["type"] == "rate_limit_error" and "--max-websockets" in error["message"]
        opened.pop().close()
        eventually(lambda: server.app.state.ws_caps.open.total() == 1)
        opened.append(connect(url, open_timeout=10))  # the freed place is taken again
        refused(url)
    finally:
        for ws in opened:
            ws.close()
    eventually(lambda: server.app.state.ws_caps.open.total() == 0)


def test_websocket_connections_are_capped_per_key() -> None:
    config = Config(api_key="k1", max_websockets=10, max_websockets_per_key=2, code_interpreter=False)
    live = LiveServer(config, FakeEngine(), None, db=":memory:").start()
    url, key = ws_url(live), {"Authorization": "Bearer k1"}
    try:
        opened = [connect(url, open_timeout=10, additional_headers=key) for _ in range(2)]
        error = refused(url, key)
        assert "--max-websockets-per-key" in error["message"] and "API key" in error["message"]
        opened.pop().close()
        eventually(lambda: live.app.state.ws_caps.open.total() == 1)
        opened.append(connect(url, open_timeout=10, additional_headers=key))
        for ws in opened:
            ws.close()
    finally:
        live.stop()

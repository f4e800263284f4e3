"""WebSocket mode on `/v1/responses` over the scripted engine, with a raw `websockets` client: the events, the
connection-local cache, lanes, limits, bad client events and close codes (the real clients: tests/clients/)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai.types.responses.responses_server_event import ResponseWsError
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_as, validate_event
from vllm_responses.api import websocket
from vllm_responses.config import Config
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import GenerateRequest, Message

MODEL = "fake-model"
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def ws_url(server: LiveServer) -> str:
    return f"ws://127.0.0.1:{server.port}/v1/responses"


@pytest.fixture
def ws(fake_server: LiveServer) -> Iterator[ClientConnection]:
    with connect(ws_url(fake_server), open_timeout=10) as conn:
        yield conn


def create(ws: ClientConnection, **body: Any) -> None:
    ws.send(json.dumps({"type": "response.create", "model": MODEL, **body}))


def recv(ws: ClientConnection) -> dict[str, Any]:
    """One server event, validated: an error against the SDK's `ResponseWsError`, anything else as the SSE
    event it is (after its `stream_id`, which the SDK's WebSocket event types add)."""
    event: dict[str, Any] = json.loads(ws.recv(timeout=30))
    if event["type"] == "error":
        validate_as(ResponseWsError, event)
        assert set(event) <= {"type", "status", "error", "stream_id"}
        assert set(event["error"]) == {"type", "code", "message", "param"}
    else:
        validate_event({k: v for k, v in event.items() if k != "stream_id"})
    return event


def one_response(ws: ClientConnection) -> list[dict[str, Any]]:
    """Events until one terminal event or error (on a connection with one lane busy)."""
    events = []
    while True:
        events.append(recv(ws))
        if events[-1]["type"] in (*TERMINAL, "error"):
            return events


def stream_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's events as SSE carries them (no `stream_id`), checked as one stream."""
    plain = [{k: v for k, v in e.items() if k != "stream_id"} for e in events]
    check_stream(plain)
    return plain


def last_user(request: GenerateRequest) -> str:
    return next(t.text for t in reversed(request.turns) if isinstance(t, Message) and t.role == "user")


def test_same_events_as_sse_and_several_responses(
    fake_server: LiveServer, engine: FakeEngine, ws: ClientConnection
) -> None:
    engine.reset(code_call("print(6 * 7)"), say("It is 42."))
    with httpx.Client(timeout=30) as http:
        body = {"model": MODEL, "input": "Compute.", "tools": CI, "stream": True}
        sse = parse_sse(http.post(fake_server.base_url + "/v1/responses", json=body).text)
    engine.reset(code_call("print(6 * 7)"), say("It is 42."))
    create(ws, input="Compute.", tools=CI)
    first = stream_of(one_response(ws))
    assert all("stream_id" not in e for e in first)  # the default lane omits it

    def shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(e["type"], e["sequence_number"], e.get("delta"), e.get("output_index")) for e in events]

    assert shape(first) == shape(sse)
    assert first[-1]["response"]["output"][0]["type"] == "code_interpreter_call"
    # A second and a third response on the same connection, each a stream of its own from 0.
    for text in ("Again.", "Once more."):
        engine.reset(say(text))
        create(ws, input=text)
        events = stream_of(one_response(ws))
        assert events[-1]["type"] == "response.completed"
        assert events[-1]["response"]["output"][0]["content"][0]["text"] == text


def test_previous_response_id_from_the_connection_cache_with_store_false(
    fake_server: LiveServer, engine: FakeEngine, ws: ClientConnection
) -> None:
    engine.reset(say("Noted: 7."))
    create(ws, input="Remember 7.", store=False)
    first = one_response(ws)[-1]["response"]
    engine.reset(say("It was 7."))
    create(ws, input="What was it?", previous_response_id=first["id"], store=False)
    second = one_response(ws)[-1]
    assert second["type"] == "response.completed"
    assert second["response"]["previous_response_id"] == first["id"]
    assert engine.requests[-1].turns == (
        Message("user", "Remember 7."),
        Message("assistant", "Noted: 7."),
        Message("user", "What was it?"),
    )
    # Over HTTP, that chain does not exist.
    with httpx.Client(timeout=30) as http:
        r = http.post(
            fake_server.base_url + "/v1/responses",
            json={"model": MODEL, "input": "x", "previous_response_id": first["id"]},
        )
    assert r.status_code == 404 and r.json()["error"]["code"] == "previous_response_not_found"
    # A reconnect starts clean.
    with connect(ws_url(fake_server)) as again:
        create(again, input="x", previous_response_id=second["response"]["id"])
        err = recv(again)
    assert err["status"] == 404 and err["error"]["code"] == "previous_response_not_found"
    assert err["error"]["param"] == "previous_response_id" and "stream_id" not in err


def test_stored_responses_continue_across_connections(
    fake_server: LiveServer, engine: FakeEngine, ws: ClientConnection
) -> None:
    engine.reset(say("Stored."))
    create(ws, input="Keep this.")
    first = one_response(ws)[-1]["response"]
    with connect(ws_url(fake_server)) as again:
        create(again, input="And?", previous_response_id=first["id"])
        assert one_response(again)[-1]["type"] == "response.completed"
    assert engine.requests[-1].turns[:2] == (Message("user", "Keep this."), Message("assistant", "Stored."))


def test_unknown_previous_id_is_an_error_event_and_the_connection_stays_open(
    engine: FakeEngine, ws: ClientConnection
) -> None:
    create(ws, input="x", previous_response_id="resp_nope", stream_id="lane-1")
    err = recv(ws)
    assert err == {
        "type": "error",
        "status": 404,
        "stream_id": "lane-1",
        "error": {
            "type": "invalid_request_error",
            "code": "previous_response_not_found",
            "message": "Previous response with id 'resp_nope' not found.",
            "param": "previous_response_id",
        },
    }
    create(ws, input="still here", stream_id="lane-1")
    assert one_response(ws)[-1]["type"] == "response.completed"


def test_a_failed_same_lane_continuation_evicts_its_parent_and_a_failed_fork_does_not(
    engine: FakeEngine, ws: ClientConnection
) -> None:
    for lane in ("a", "b"):
        create(ws, input="start", store=False, stream_id=lane)
        parent = one_response(ws)[-1]["response"]["id"]
        other = "b" if lane == "a" else "a"
        # A fork from the other lane that fails (a 4xx) keeps the parent...
        create(ws, input="x", previous_response_id=parent, stream_id=other, temperature=9)
        err = recv(ws)
        assert err["status"] == 400 and err["error"]["param"] == "temperature" and err["stream_id"] == other
        create(ws, input="x", previous_response_id=parent, stream_id=lane, temperature=9)
        assert recv(ws)["status"] == 400
        # ...a same-lane one evicts it.
        create(ws, input="x", previous_response_id=parent, stream_id=lane)
        err = recv(ws)
        assert err["error"]["code"] == "previous_response_not_found" and err["stream_id"] == lane


def test_a_response_that_fails_after_starting_evicts_its_parent(
    engine: FakeEngine, ws: ClientConnection
) -> None:
    create(ws, input="start", store=False)
    parent = one_response(ws)[-1]["response"]["id"]

    def broken(request: GenerateRequest) -> list[Any]:
        raise EngineError("the engine fell over")

    engine.reset(broken)
    create(ws, input="x", previous_response_id=parent)
    events = one_response(ws)
    assert events[-1]["type"] == "response.failed"
    stream_of(events)
    create(ws, input="x", previous_response_id=parent)
    assert recv(ws)["error"]["code"] == "previous_response_not_found"


def test_lanes_interleave_fifo_within_a_lane(engine: FakeEngine, ws: ClientConnection) -> None:
    engine.reset(lambda request: say(f"answer to {last_user(request)} " * 4), delay=0.01)
    for text in ("a1", "a2"):
        create(ws, input=text, stream_id="a")
    create(ws, input="b1", stream_id="b")
    create(ws, input="d1")  # the default lane
    events: list[dict[str, Any]] = []
    while sum(e["type"] == "response.completed" for e in events) < 4:
        events.append(recv(ws))
    lanes: dict[str | None, list[dict[str, Any]]] = {}
    for e in events:
        lanes.setdefault(e.get("stream_id"), []).append(e)
    assert set(lanes) == {"a", "b", None}
    # Lane a ran a1 to its end before a2 began.
    a = lanes["a"]
    ends = [i for i, e in enumerate(a) if e["type"] == "response.completed"]
    stream_of(a[: ends[0] + 1])
    second = stream_of(a[ends[0] + 1 :])
    assert second[-1]["response"]["output"][0]["content"][0]["text"].startswith("answer to a2")
    stream_of(lanes["b"])
    stream_of(lanes[None])
    # Lanes interleaved: lane b started before lane a's first response ended.
    first_b = events.index(lanes["b"][0])
    assert first_b < events.index(a[ends[0]])


def test_at_most_max_active_responses_at_once(
    fake_server: LiveServer, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(websocket, "LIMITS", websocket.WebSocketLimits(max_active=1))
    engine.reset(say("x " * 10), delay=0.01)
    with connect(ws_url(fake_server)) as ws:
        create(ws, input="first", stream_id="a")
        create(ws, input="second", stream_id="b")
        events: list[dict[str, Any]] = []
        while sum(e["type"] == "response.completed" for e in events) < 2:
            events.append(recv(ws))
    types = [(e["stream_id"], e["type"]) for e in events]
    # The second lane's create waited in its lane for the first response to end.
    assert types.index(("b", "response.created")) > types.index(("a", "response.completed"))


def test_stream_id_rules_and_the_named_lane_limit(engine: FakeEngine, ws: ClientConnection) -> None:
    for bad in ("", "a b", "x" * 257, 7, "é"):
        create(ws, input="x", stream_id=bad)
        err = recv(ws)
        assert err["status"] == 400 and err["error"]["code"] == "invalid_stream_id" and "stream_id" not in err
    for i in range(32):
        create(ws, input="x", stream_id=f"lane.{i}", model="nope")  # a cheap request error per lane
        assert recv(ws)["stream_id"] == f"lane.{i}"
    create(ws, input="x", stream_id="lane-33")
    err = recv(ws)
    assert err["error"]["code"] == "websocket_stream_limit_reached" and err["stream_id"] == "lane-33"
    create(ws, input="x", stream_id="lane.0")  # a lane already used is still open
    assert one_response(ws)[-1]["stream_id"] == "lane.0"
    create(ws, input="x")  # and the default lane does not count
    assert one_response(ws)[-1]["type"] == "response.completed"


@pytest.mark.parametrize(
    "message,param,code",
    [
        ("not json", None, "invalid_json"),
        ("[1, 2]", None, "invalid_value"),
        (json.dumps({"type": "response.cancel"}), "type", "invalid_value"),
        (json.dumps({"model": MODEL, "input": "x"}), "type", "invalid_value"),
        (json.dumps({"type": "response.create", "input": "x"}), "model", "missing_required_parameter"),
        (
            json.dumps({"type": "response.create", "model": MODEL, "input": "x", "temperature": 9}),
            "temperature",
            None,
        ),
        (json.dumps({"type": "response.create", "model": "gpt-9", "input": "x"}), "model", "model_not_found"),
        (
            json.dumps({"type": "response.create", "model": MODEL, "input": "x", "background": True}),
            "background",
            None,
        ),
        (
            json.dumps({"type": "response.create", "model": MODEL, "input": "x", "generate": "no"}),
            "generate",
            None,
        ),
    ],
)
def test_bad_client_events_get_an_error_event_and_the_socket_stays(
    engine: FakeEngine, ws: ClientConnection, message: str, param: str | None, code: str | None
) -> None:
    ws.send(message)
    err = recv(ws)
    assert err["type"] == "error" and 400 <= err["status"] < 500
    assert err["error"]["param"] == param
    if code is not None:
        assert err["error"]["code"] == code
    create(ws, input="fine")
    assert one_response(ws)[-1]["type"] == "response.completed"


def test_binary_messages_are_read_as_text(engine: FakeEngine, ws: ClientConnection) -> None:
    ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "x"}).encode())
    assert one_response(ws)[-1]["type"] == "response.completed"
    ws.send(b"\xff\xfe")
    assert recv(ws)["error"]["code"] == "invalid_json"


def test_generate_false_warms_a_chain_up(engine: FakeEngine, ws: ClientConnection) -> None:
    create(ws, input="Context to keep.", instructions="Be brief.", store=False, generate=False)
    events = stream_of(one_response(ws))
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "response.completed"]
    warm = events[-1]["response"]
    assert warm["status"] == "completed" and warm["output"] == []
    assert warm["usage"]["input_tokens"] == 0 and warm["usage"]["output_tokens"] == 0
    assert engine.requests == []  # the model was not called
    create(ws, input="Now answer.", previous_response_id=warm["id"], store=False)
    assert one_response(ws)[-1]["type"] == "response.completed"
    assert engine.requests[-1].turns == (Message("user", "Context to keep."), Message("user", "Now answer."))


def test_leaving_mid_response_cancels_it(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(say("word " * 200), delay=0.02)
    with connect(ws_url(fake_server)) as ws:
        create(ws, input="long")
        while recv(ws)["type"] != "response.output_text.delta":
            pass
    deadline = time.monotonic() + 10
    while not engine.aborted:
        assert time.monotonic() < deadline, "the engine request was not aborted"
        time.sleep(0.02)


def test_the_connection_limit_sends_an_error_and_closes_1001(
    fake_server: LiveServer, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(websocket, "LIMITS", websocket.WebSocketLimits(max_connection_s=0.5))
    with connect(ws_url(fake_server)) as ws:
        err = recv(ws)
        assert err["error"]["code"] == "websocket_connection_limit_reached" and "stream_id" not in err
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


def test_api_key_is_checked_before_the_upgrade() -> None:
    server = LiveServer(Config(api_key="sekrit"), FakeEngine(), FakeInterpreter()).start()
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(InvalidStatus) as refused:
                connect(ws_url(server), additional_headers=headers)
            assert refused.value.response.status_code == 401
            assert json.loads(refused.value.response.body)["error"]["type"] == "authentication_error"
        with connect(ws_url(server), additional_headers={"Authorization": "Bearer sekrit"}) as ws:
            create(ws, input="hi")
            assert one_response(ws)[-1]["type"] == "response.completed"
    finally:
        server.stop()

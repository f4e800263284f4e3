"""`response.steer` in WebSocket mode over the scripted engine, with a raw `websockets` client: steering input
accepted while a response generates and committed by an automatic successor, pending while client output is
due and committed by the client's next create, and refused (each event as the SDK's beta types describe it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai.types.beta.beta_response_steer_accepted_event import BetaResponseSteerAcceptedEvent
from openai.types.beta.beta_response_steer_failed_event import BetaResponseSteerFailedEvent
from openai.types.beta.beta_response_steer_pending_event import BetaResponseSteerPendingEvent
from websockets.sync.client import ClientConnection, connect

from tests.api.test_websocket import create, ws_url
from tests.support.fakes import FakeEngine, function_call, say
from tests.support.serving import LiveServer
from tests.support.wire import validate_as, validate_event
from vllm_responses.engine.types import Message, ToolResult

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
STEER_EVENTS = {
    "response.steer.accepted": BetaResponseSteerAcceptedEvent,
    "response.steer.pending": BetaResponseSteerPendingEvent,
    "response.steer.failed": BetaResponseSteerFailedEvent,
}


@pytest.fixture
def ws(fake_server: LiveServer) -> Iterator[ClientConnection]:
    with connect(ws_url(fake_server), open_timeout=10) as conn:
        yield conn


def recv(ws: ClientConnection) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(ws.recv(timeout=30))
    if event["type"] in STEER_EVENTS:
        validate_as(STEER_EVENTS[event["type"]], event)
    else:
        validate_event({k: v for k, v in event.items() if k != "stream_id"})
    return event


def until(ws: ClientConnection, *types: str) -> list[dict[str, Any]]:
    events = []
    while not events or events[-1]["type"] not in types:
        events.append(recv(ws))
    return events


def steer(ws: ClientConnection, response_id: str, text: Any) -> None:
    ws.send(json.dumps({"type": "response.steer", "previous_response_id": response_id, "input": text}))


def users(engine: FakeEngine, call: int) -> list[str]:
    return [t.text for t in engine.requests[call].turns if isinstance(t, Message) and t.role == "user"]


def test_a_steer_is_accepted_and_committed_by_an_automatic_successor(
    engine: FakeEngine, ws: ClientConnection
) -> None:
    engine.reset(say("a long first answer " * 20), say("Steered: metric units."), delay=0.02)
    create(ws, input="Weather in Oslo?", instructions="Be brief.", stream_id="lane")
    first = until(ws, "response.output_text.delta")[0]["response"]
    steer(ws, first["id"], "Use metric units.")
    events = until(ws, "response.completed")
    accepted = next(e for e in events if e["type"] == "response.steer.accepted")
    assert accepted["steer"]["previous_response_id"] == first["id"] and accepted["stream_id"] == "lane"
    assert accepted["steer"]["id"].startswith("steer_")
    assert events[-1]["response"]["id"] == first["id"]  # the first response ran to its end
    successor = until(ws, "response.completed")
    created = successor[0]
    assert created["type"] == "response.created" and created["stream_id"] == "lane"
    assert created["response"]["previous_response_id"] == first["id"]
    assert created["response"]["instructions"] == "Be brief."  # the successor inherits the settings
    assert successor[-1]["response"]["output"][0]["content"][0]["text"] == "Steered: metric units."
    assert users(engine, 1) == ["Weather in Oslo?", "Use metric units."]


def test_a_steer_waits_while_client_output_is_due_then_goes_first(
    engine: FakeEngine, ws: ClientConnection
) -> None:
    engine.reset(
        [*function_call("get_weather", {"city": "Oslo"})[:-1], *say("x")[-1:]], say("ok"), delay=0.05
    )
    tools = [{"type": "function", "name": "get_weather"}]
    create(ws, input="Weather?", tools=tools)
    first = until(ws, "response.created")[0]["response"]
    steer(
        ws,
        first["id"],
        [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Also wind."}]}],
    )
    events = until(ws, "response.steer.pending")
    call = next(e["item"] for e in events if e["type"] == "response.output_item.done")
    pending = events[-1]
    assert pending["reason"] == "waiting_for_required_input"
    assert pending["required_input"] == [
        {"type": "function_call_output", "call_id": call["call_id"], "name": "get_weather"}
    ]
    create(
        ws,
        previous_response_id=first["id"],
        tools=tools,
        input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "3C"}],
    )
    until(ws, "response.completed")
    turns = engine.requests[-1].turns
    steered = next(i for i, t in enumerate(turns) if isinstance(t, Message) and t.text == "Also wind.")
    output = next(i for i, t in enumerate(turns) if isinstance(t, ToolResult))
    assert steered < output  # the queued input goes first


@pytest.mark.parametrize(
    ("event", "code"),
    [
        ({"previous_response_id": "resp_nope", "input": "hi"}, "response_not_active"),
        ({"previous_response_id": "resp_x", "input": []}, "invalid_input"),
        (
            {"previous_response_id": "resp_x", "input": [{"role": "assistant", "content": "x"}]},
            "invalid_input",
        ),
        ({"previous_response_id": "resp_x", "input": "hi", "stream_id": "a"}, "invalid_input"),
    ],
)
def test_refused_steers_fail_and_the_connection_stays(
    engine: FakeEngine, ws: ClientConnection, event: dict[str, Any], code: str
) -> None:
    ws.send(json.dumps({"type": "response.steer", **event}))
    failed = recv(ws)
    assert failed["type"] == "response.steer.failed" and failed["error"]["code"] == code
    engine.reset(say("still here"))
    create(ws, input="hi")
    assert until(ws, "response.completed")[-1]["response"]["status"] == "completed"


def test_a_steer_of_a_response_that_ends_badly_fails(engine: FakeEngine, ws: ClientConnection) -> None:
    engine.reset(say("a long answer " * 40), delay=0.02)
    create(ws, input="go", max_output_tokens=16)
    first = until(ws, "response.output_text.delta")[0]["response"]
    steer(ws, first["id"], "and then?")
    events = until(ws, "response.steer.failed")
    assert any(e["type"] == "response.incomplete" for e in events)
    assert events[-1]["error"]["code"] == "response_not_active"

"""WebSocket mode through the real clients: the `openai` Python SDK's `client.responses.connect()` (with its
`ResponsesWebSocketSession` lanes) and the Node SDK's `ResponsesWS` (`node/openai_ws.mjs`, on `ws`), each
running a code-interpreter turn and a continuation over one socket with `store: false`.

Outputs are forced with `structured_outputs`, which both SDKs pass through in a `response.create` event.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.lib.responses_websocket import ResponsesWebSocketLimits, ResponsesWebSocketSession
from openai.types.responses import ResponseCodeInterpreterToolCall
from openai.types.responses.responses_server_event import ResponseWsError

from tests.clients.node_runner import run_script
from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call
from tests.support.wire import CODE_TURN_EVENT_RUNS, check_stream, event_runs, validate_as

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

CI: Any = [{"type": "code_interpreter", "container": {"type": "auto"}}]
INCLUDE: Any = ["code_interpreter_call.outputs"]
LIMITS = ResponsesWebSocketLimits(
    max_lanes=4, max_events_per_lane=2000, max_events=4000, max_bytes_per_lane=1 << 24, max_bytes=1 << 25
)


def forced(*outputs: str) -> list[dict[str, str]]:
    return [exactly(o) for o in outputs]


def as_sse(events: list[dict[str, Any]], stream_id: str | None = None) -> list[dict[str, Any]]:
    """The events without the lane's `stream_id` (which every one of them carries, or none does), checked as
    an SSE stream is."""
    assert all(e.get("stream_id") == stream_id for e in events)
    plain = [{k: v for k, v in e.items() if k != "stream_id"} for e in events]
    check_stream(plain)
    return plain


def test_python_sdk_connect_code_turn_and_continuation(base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
    with client.responses.connect() as connection:
        connection.send(
            {
                "type": "response.create",
                "model": MODEL,
                "input": "Set z and print it.",
                "tools": CI,
                "include": INCLUDE,
                "store": False,
                "structured_outputs": forced(hermes_call("z = 7\nprint(z)"), "z is 7."),  # type: ignore[typeddict-unknown-key]
            }
        )
        first = []
        for event in connection:  # the SDK's own event classes
            first.append(event.model_dump(mode="json", exclude_unset=True))
            if event.type == "response.completed":
                break
        assert event_runs(e["type"] for e in as_sse(first)) == CODE_TURN_EVENT_RUNS
        done = first[-1]["response"]
        call = done["output"][0]
        assert call["code"] == "z = 7\nprint(z)" and call["outputs"] == [{"type": "logs", "logs": "7\n"}]

        # The continuation on a named lane of the SDK's session helper, from the connection's cache.
        with ResponsesWebSocketSession(connection, limits=LIMITS) as session:
            lane = session.lane("turns")
            lane.send(
                {
                    "type": "response.create",
                    "model": MODEL,
                    "input": "Use z.",
                    "tools": CI,
                    "include": INCLUDE,
                    "store": False,
                    "previous_response_id": done["id"],
                    "structured_outputs": forced(hermes_call("print(z * 6)"), "z * 6 is 42."),  # type: ignore[typeddict-unknown-key]
                }
            )
            second = lane.get_final_response()
            assert second.status == "completed" and second.previous_response_id == done["id"]
            assert second.output_text == "z * 6 is 42."
            code = second.output[0]
            assert isinstance(code, ResponseCodeInterpreterToolCall)
            assert code.container_id == call["container_id"]  # the same sandbox: z survived
            assert code.outputs is not None and code.outputs[0].model_dump() == {
                "type": "logs",
                "logs": "42\n",
            }

            # An unknown parent: the SDK raises the error event it got, and the socket stays usable.
            lane.send(
                {"type": "response.create", "model": MODEL, "input": "x", "previous_response_id": "resp_x"}
            )
            with pytest.raises(Exception) as raised:
                lane.get_final_response()
            event = raised.value.event  # type: ignore[attr-defined]
            assert event.error.code == "previous_response_not_found" and event.status == 404
            assert event.stream_id == "turns"
            lane.send(
                {
                    "type": "response.create",
                    "model": MODEL,
                    "input": "Again.",
                    "store": False,
                    "structured_outputs": [exactly("Still here.")],  # type: ignore[typeddict-unknown-key]
                }
            )
            assert lane.get_final_response().output_text == "Still here."


def test_node_sdk_responses_ws_code_turn_and_continuation(base_url: str) -> None:
    plan = {
        "model": MODEL,
        "first": forced(hermes_call("z = 7\nprint(z)"), "z is 7."),
        "second": forced(hermes_call("print(z * 6)"), "z * 6 is 42."),
    }
    out = run_script("openai_ws.mjs", base_url, plan)
    first = as_sse(out["first"])
    assert event_runs(e["type"] for e in first) == CODE_TURN_EVENT_RUNS
    call = first[-1]["response"]["output"][0]
    assert call["outputs"] == [{"type": "logs", "logs": "7\n"}]
    second = as_sse(out["second"], "lane-1")
    assert event_runs(e["type"] for e in second) == CODE_TURN_EVENT_RUNS
    final = second[-1]["response"]
    assert final["previous_response_id"] == first[-1]["response"]["id"]
    assert final["output"][0]["container_id"] == call["container_id"]
    assert final["output"][0]["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert final["output"][1]["content"][0]["text"] == "z * 6 is 42."
    # The error event reached the SDK's error channel; nothing else came for that request.
    assert out["missing"] == []
    (error,) = out["errors"]
    assert error["type"] == "error" and error["status"] == 404
    assert error["error"]["code"] == "previous_response_not_found"
    validate_as(ResponseWsError, error)

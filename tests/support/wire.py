"""Checks that what the server sends is exactly what the `openai` SDK's types describe."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

import openai
import pydantic
import pytest
from openai.types.responses import Response, ResponseStreamEvent

__all__ = [
    "CODE_TURN_EVENT_RUNS",
    "MESSAGE_EVENT_RUNS",
    "RESPONSE_EXTRAS",
    "check_stream",
    "event_runs",
    "parse_sse",
    "sdk_refusal",
    "validate_as",
    "validate_event",
    "validate_response",
]

_EVENT = pydantic.TypeAdapter(ResponseStreamEvent)

# The event types of one assistant message, each run of deltas counted once.
MESSAGE_EVENT_RUNS = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]

# The event types of a turn that runs code once and then answers, each run of deltas counted once.
CODE_TURN_EVENT_RUNS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed",
    "response.output_item.done",
    *MESSAGE_EVENT_RUNS,
    "response.completed",
]


def event_runs(types: Iterable[str]) -> list[str]:
    """Event types with each run of repeats (deltas) collapsed into one."""
    return [t for t, _ in itertools.groupby(types)]


# The only fields we send that the SDK types do not declare, on the response object alone: Open Responses
# requires them and OpenAI's API sends them (protocol/items.py `ResponseEcho`).
RESPONSE_EXTRAS = frozenset({"store", "presence_penalty", "frequency_penalty"})


def _no_extras(model: Any, path: str) -> None:
    """Fail when a field we sent is unknown to the SDK type (it would be silently kept as an extra)."""
    if isinstance(model, pydantic.BaseModel):
        extra = set(model.model_extra or {}) - (RESPONSE_EXTRAS if isinstance(model, Response) else set())
        assert not extra, f"{path}: fields unknown to the SDK types: {sorted(extra)}"
        for name in type(model).model_fields:
            _no_extras(getattr(model, name), f"{path}.{name}")
    elif isinstance(model, list):
        for i, v in enumerate(model):
            _no_extras(v, f"{path}[{i}]")


def validate_event(event: dict[str, Any]) -> Any:
    parsed = _EVENT.validate_python(event)
    assert parsed.type == event["type"]
    _no_extras(parsed, event["type"])
    return parsed


def validate_as(model: type[pydantic.BaseModel], body: dict[str, Any]) -> Any:
    """`body` parsed as the SDK type `model`, failing on any field the type does not know."""
    parsed = model.model_validate(body)
    _no_extras(parsed, model.__name__)
    return parsed


def validate_response(body: dict[str, Any]) -> Response:
    parsed = Response.model_validate(body)
    _no_extras(parsed, "response")
    return parsed


def sdk_refusal(call: Callable[[], Any]) -> dict[str, Any]:
    """The error object of the 4xx the SDK raised for `call()` (the SDK's `body` is the body's `error`), checked
    to carry OpenAI's four fields."""
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    assert 400 <= caught.value.status_code < 500, caught.value
    error = caught.value.body
    assert isinstance(error, dict) and {"message", "type", "param", "code"} <= error.keys(), error
    return error


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Frames as sent: each `event: T` line must match its data's type, one JSON line per frame. Comment
    frames (`: keep-alive`, sent when a stream is silent for `--sse-keepalive` seconds, as on a loaded host
    while code runs) are skipped, as every SSE client skips them."""
    events = []
    for frame in text.strip().split("\n\n"):
        lines = frame.split("\n")
        if all(line.startswith(":") for line in lines):
            continue
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        data = json.loads(lines[1][len("data: ") :])
        assert data["type"] == lines[0][len("event: ") :]
        events.append(data)
    return events


def check_stream(events: list[dict[str, Any]]) -> None:
    """Every event validates; sequence numbers run 0, 1, 2, ...; items are added before they are used
    and finished before the end; exactly one terminal event, last."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    added: dict[int, str] = {}
    done: set[int] = set()
    for e in events:
        validate_event(e)
        if e["type"] == "response.output_item.added":
            assert e["output_index"] not in added
            assert e["output_index"] == len(added)
            added[e["output_index"]] = e["item"]["id"]
        elif e["type"] == "response.output_item.done":
            assert added[e["output_index"]] == e["item"]["id"]
            done.add(e["output_index"])
        elif "output_index" in e:
            assert e["output_index"] in added and e["output_index"] not in done, e
            assert e.get("item_id", added[e["output_index"]]) == added[e["output_index"]]
    terminal = [
        e for e in events if e["type"] in ("response.completed", "response.incomplete", "response.failed")
    ]
    assert len(terminal) == 1 and terminal[0] is events[-1]
    assert done == set(added), "items left unfinished"
    final = validate_response(events[-1]["response"])
    assert [it.id for it in final.output] == [added[i] for i in sorted(added)]

"""The `openai` Python SDK, unchanged, against the real server: sync and async create, raw streamed events parsed
into the SDK's event classes, the `responses.stream()` helper, and several turns over `previous_response_id`.

Outputs are forced with the `structured_outputs` extension, sent the SDK's own way (`extra_body`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import (
    ResponseCodeInterpreterCallCodeDeltaEvent,
    ResponseCodeInterpreterToolCall,
    ResponseCompletedEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputMessage,
)

from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call
from tests.support.wire import CODE_TURN_EVENT_RUNS, check_stream, event_runs

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

CI: Any = [{"type": "code_interpreter", "container": {"type": "auto"}}]
INCLUDE: Any = ["code_interpreter_call.outputs"]


def forced(*outputs: str) -> dict[str, Any]:
    """`extra_body` making the model write each text in turn, one per model call of the agent loop."""
    return {"structured_outputs": [exactly(o) for o in outputs]}


def plain(resp: Any) -> Any:
    """A response as its JSON, without what the SDK adds client-side (`output_text`, `parsed`)."""
    data = json.loads(resp.model_dump_json(exclude={"output_text"}))
    for item in data["output"]:
        for part in item.get("content") or []:
            part.pop("parsed", None)
    return data


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300) as sdk:
        yield sdk


@pytest.fixture
async def aclient(base_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300) as sdk:
        yield sdk


def test_sync_create_runs_code_and_three_turns_share_the_container(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model=MODEL,
        input="Define f.",
        tools=CI,
        include=INCLUDE,
        extra_body=forced(
            hermes_call("def f(n):\n    return n * 7\nprint(f(3))"), "f is defined; f(3) is 21."
        ),
    )
    assert first.status == "completed"
    call, message = first.output
    assert isinstance(call, ResponseCodeInterpreterToolCall) and isinstance(message, ResponseOutputMessage)
    assert call.status == "completed" and call.container_id.startswith("cntr_")
    assert call.outputs is not None and [(o.type, getattr(o, "logs", None)) for o in call.outputs] == [
        ("logs", "21\n")
    ]
    assert first.output_text == "f is defined; f(3) is 21."

    second = client.responses.create(
        model=MODEL,
        input="Use it.",
        tools=CI,
        include=INCLUDE,
        previous_response_id=first.id,
        extra_body=forced(hermes_call("print(f(6))"), "f(6) is 42."),
    )
    call2 = second.output[0]
    assert isinstance(call2, ResponseCodeInterpreterToolCall)
    assert call2.container_id == call.container_id, "the second turn must reuse the first turn's container"
    assert call2.outputs is not None and call2.outputs[0].logs == "42\n"  # type: ignore[union-attr]

    third = client.responses.create(
        model=MODEL,
        input="Say it again, no code.",
        previous_response_id=second.id,
        extra_body=forced("42."),
    )
    assert [it.type for it in third.output] == ["message"] and third.output_text == "42."
    assert third.previous_response_id == second.id
    assert plain(client.responses.retrieve(third.id)) == plain(third)
    items = list(client.responses.input_items.list(third.id))
    assert [(it.type, it.role) for it in items] == [("message", "user")]  # type: ignore[union-attr]


def test_raw_stream_events_are_the_sdks_event_classes(client: openai.OpenAI) -> None:
    code = "print(sum(range(10)))"
    events = list(
        client.responses.create(
            model=MODEL,
            input="Sum.",
            tools=CI,
            include=INCLUDE,
            stream=True,
            extra_body=forced(hermes_call(code), "45."),
        )
    )
    # Each event is the SDK's own class for its type, holding no field the SDK does not know.
    for e in events:
        assert type(e).__name__ != "BaseModel" and not (e.model_extra or {}), e
    check_stream([e.model_dump(mode="json", exclude_unset=True) for e in events])
    assert event_runs(e.type for e in events) == CODE_TURN_EVENT_RUNS
    added = next(e for e in events if isinstance(e, ResponseOutputItemAddedEvent))
    assert isinstance(added.item, ResponseCodeInterpreterToolCall)
    assert (
        added.item.code == ""
        and added.item.status == "in_progress"
        and added.item.container_id.startswith("cntr_")
    )
    deltas = [e.delta for e in events if isinstance(e, ResponseCodeInterpreterCallCodeDeltaEvent)]
    assert "".join(deltas) == code
    final = events[-1]
    assert isinstance(final, ResponseCompletedEvent)
    assert final.response.output[0].outputs[0].logs == "45\n"  # type: ignore[union-attr,index]
    assert final.response.output_text == "45."


def test_stream_helper_final_response_equals_retrieve(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model=MODEL,
        input="Set y.",
        tools=CI,
        include=INCLUDE,
        extra_body=forced(hermes_call("y = 5"), "Set."),
    )
    code = "print(y ** 2)"
    with client.responses.stream(
        model=MODEL,
        input="Square y.",
        tools=CI,
        include=INCLUDE,
        previous_response_id=first.id,
        extra_body=forced(hermes_call(code), "y squared is 25."),
    ) as stream:
        seen = [e.type for e in stream]
        final = stream.get_final_response()
    assert seen[0] == "response.created" and seen[-1] == "response.completed"
    assert final.output[0].code == code and final.output[0].outputs[0].logs == "25\n"  # type: ignore[union-attr,index]
    assert final.output_text == "y squared is 25."
    assert plain(final) == plain(client.responses.retrieve(final.id))


async def test_async_create_stream_and_helper(aclient: openai.AsyncOpenAI) -> None:
    first = await aclient.responses.create(
        model=MODEL,
        input="Make a list.",
        tools=CI,
        include=INCLUDE,
        extra_body=forced(hermes_call("xs = [3, 1, 2]\nprint(sorted(xs))"), "Sorted: [1, 2, 3]."),
    )
    assert first.output[0].outputs[0].logs == "[1, 2, 3]\n"  # type: ignore[union-attr,index]
    assert first.output_text == "Sorted: [1, 2, 3]."

    stream = await aclient.responses.create(
        model=MODEL,
        input="Its length?",
        tools=CI,
        include=INCLUDE,
        previous_response_id=first.id,
        stream=True,
        extra_body=forced(hermes_call("print(len(xs))"), "3 items."),
    )
    events = [e async for e in stream]
    check_stream([e.model_dump(mode="json", exclude_unset=True) for e in events])
    second = events[-1].response  # type: ignore[union-attr]
    assert second.output[0].outputs[0].logs == "3\n" and second.output_text == "3 items."

    async with aclient.responses.stream(
        model=MODEL,
        input="Max?",
        tools=CI,
        include=INCLUDE,
        previous_response_id=second.id,
        extra_body=forced(hermes_call("print(max(xs))"), "The max is 3."),
    ) as helper:
        async for _ in helper:
            pass
        third = await helper.get_final_response()
    assert third.output[0].outputs[0].logs == "3\n" and third.output_text == "The max is 3."  # type: ignore[union-attr,index]
    assert plain(third) == plain(await aclient.responses.retrieve(third.id))

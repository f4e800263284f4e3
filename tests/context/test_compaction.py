"""Compaction over the fake engine: `POST /v1/responses/compact` through the SDK, `compaction` items as input,
`context_management` on create, the split rule, and the 4xx paths (the real model: test_compaction_real.py)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pydantic
import pytest
from openai.types.responses import (
    CompactedResponse,
    ResponseCompactionItem,
    ResponseInputMessageItem,
    ResponseOutputItem,
)

from tests.protocol.test_protocol_types import _check as check_typed_dict
from tests.support.fakes import FakeEngine, code_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_as
from vllm_responses.context.compaction import split
from vllm_responses.context.turns import SUMMARY_HEADER
from vllm_responses.engine.types import Message
from vllm_responses.protocol.compaction import CompactedResponse as CompactedResponseShape
from vllm_responses.protocol.compaction import CompactionItem, open_summary, seal_summary

MODEL = "fake-model"
SUMMARY = "The user's locker code is 4417 and their name is Ada."

CONVERSATION: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": "Hi! My name is Ada and my locker code is 4417. " + "Some chatter. " * 60},
    {"role": "assistant", "content": "Noted, Ada. " + "More chatter back. " * 60},
    {"role": "user", "content": "What did we talk about? " + "Filler. " * 40},
    {"role": "assistant", "content": "Your name and your locker code. " + "Filler reply. " * 40},
    {"role": "user", "content": "What is my locker code?"},
]

_OUT = pydantic.TypeAdapter(ResponseOutputItem)


def validate_compacted(body: dict[str, Any]) -> None:
    """The body as the SDK's `CompactedResponse` at the top; each item as the SDK type for what it is (the
    SDK's output-item union has no user or developer message, which compaction keeps: see docs/api.md)."""
    validate_as(CompactedResponse, {**body, "output": []})
    for item in body["output"]:
        if item["type"] == "compaction":
            validate_as(ResponseCompactionItem, item)
        elif item["type"] == "message" and item["role"] != "assistant":
            validate_as(ResponseInputMessageItem, item)
        else:
            _OUT.validate_python(item)


def count(client: openai.OpenAI, **kw: Any) -> int:
    return client.responses.input_tokens.count(model=MODEL, **kw).input_tokens


def test_compact_keeps_the_user_messages_then_one_compaction_item_last(
    client: openai.OpenAI, engine: FakeEngine, fake_server: LiveServer
) -> None:
    """As OpenAI's compact: the user (and system, developer) messages kept, in order, then one compaction item,
    last, standing for the assistant's side (its messages here)."""
    engine.reset(say(SUMMARY))
    raw = client.responses.with_raw_response.compact(model=MODEL, input=CONVERSATION)  # type: ignore[arg-type]
    compacted, body = raw.parse(), raw.http_response.json()
    assert compacted.object == "response.compaction" and compacted.id.startswith("resp_")
    validate_compacted(body)
    out = body["output"]
    assert [(it["type"], it.get("role")) for it in out] == [
        ("message", "developer"),
        ("message", "user"),
        ("message", "user"),
        ("message", "user"),
        ("compaction", None),
    ]
    assert [it["content"] for it in out[:4]] == [
        [{"type": "input_text", "text": m["content"]}] for m in CONVERSATION if m["role"] != "assistant"
    ]
    item = out[-1]
    assert item["id"].startswith("cmp_") and SUMMARY not in item["encrypted_content"]
    assert open_summary(item["encrypted_content"]) == SUMMARY
    # one summarising call: the transcript up to the assistant's last message in, no tools
    (call,) = engine.requests
    assert call.tools == () and call.sampling.max_tokens
    assert "locker code is 4417" in call.turns[-1].text  # type: ignore[union-attr]
    assert "Your name and your locker code." in call.turns[-1].text  # type: ignore[union-attr]
    assert "What is my locker code?" not in call.turns[-1].text  # type: ignore[union-attr]
    assert "Be brief." not in call.turns[-1].text  # type: ignore[union-attr]  (kept, not summarised)
    # the summarising call's usage (the fake counts one output token per delta)
    assert compacted.usage.output_tokens == len(say(SUMMARY)) - 1
    assert compacted.usage.input_tokens == FakeEngine.prompt_tokens(call)
    # fewer tokens than the original, counted as create would render them
    assert count(client, input=out) < count(client, input=CONVERSATION)
    # the next create takes the window and a new question; the model reads the summary as a user turn
    engine.reset(say("4417."))
    follow = client.responses.create(model=MODEL, input=[*out, {"role": "user", "content": "Again?"}])  # type: ignore[list-item]
    assert follow.output_text == "4417."
    turns = engine.requests[0].turns
    assert turns[-2:] == (Message("user", f"{SUMMARY_HEADER}\n{SUMMARY}"), Message("user", "Again?"))


def test_compact_from_a_previous_response(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("Noted. " * 50))
    first = client.responses.create(model=MODEL, input="Remember: the ferry leaves at 06:40. " * 10)
    engine.reset(say("Ferry at 06:40."))
    compacted = client.responses.compact(
        model=MODEL,
        previous_response_id=first.id,
        input="When does the ferry leave?",
        extra_body={"structured_outputs": {"regex": "Ferry at 06:40\\."}},
    )
    assert [it.type for it in compacted.output] == ["message", "message", "compaction"]
    assert engine.requests[0].sampling.structured == {"regex": "Ferry at 06:40\\."}
    assert "06:40" in engine.requests[0].turns[-1].text  # type: ignore[union-attr]


def test_only_user_messages_still_get_a_compaction_item(client: openai.OpenAI, engine: FakeEngine) -> None:
    """As OpenAI's compact: the window as the next request should send it, with a compaction item last; with
    nothing but user, system and developer messages the item is empty, made with no model call, and says
    nothing to the model."""
    engine.reset(say("unused"))
    compacted = client.responses.compact(
        model=MODEL,
        input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "Just one question?"},
        ],
    )
    assert [it.type for it in compacted.output] == ["message", "message", "compaction"]
    assert engine.requests == [] and compacted.usage.total_tokens == 0
    # (the SDK types the output as assistant items: its user messages are dumped without warnings)
    window = compacted.model_dump(mode="json", exclude_unset=True, warnings=False)
    validate_compacted(window)
    engine.reset(say("ok"))
    client.responses.create(model=MODEL, input=[*window["output"], {"role": "user", "content": "And?"}])
    assert [type(t).__name__ for t in engine.requests[0].turns] == ["Message"] * 3  # no summary turn


def test_tool_calls_and_their_outputs_are_summarised_too(client: openai.OpenAI, engine: FakeEngine) -> None:
    """Every item that is not a user, system or developer message goes into the one compaction item."""
    engine.reset(say(SUMMARY))
    window: Any = [
        {"role": "user", "content": "Look the code up."},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"who": "Ada"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "4417"},
        {"role": "assistant", "content": "It is 4417."},
        {"role": "user", "content": "Thanks."},
    ]
    compacted = client.responses.compact(model=MODEL, input=window)
    assert [(it.type, getattr(it, "role", None)) for it in compacted.output] == [
        ("message", "user"),
        ("message", "user"),
        ("compaction", None),
    ]
    (call,) = engine.requests
    assert "lookup" in call.turns[-1].text and "4417" in call.turns[-1].text  # type: ignore[union-attr]


def test_split_keeps_system_messages_and_everything_from_the_last_user_message() -> None:
    items = [
        {"type": "message", "role": "system", "content": "s"},
        {"type": "message", "role": "user", "content": "u1"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "message", "role": "user", "content": "u2"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "43"},
    ]
    kept, older, recent = split(items)
    assert kept == items[:1] and older == items[1:4] and recent == items[4:]
    assert split(items[2:4]) == ([], [], items[2:4])  # no user message: nothing to summarise


def test_context_management_compacts_once_past_the_threshold(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    total = count(client, input=CONVERSATION)
    engine.reset(say("4417."))
    below = client.responses.create(
        model=MODEL,
        input=CONVERSATION,  # type: ignore[arg-type]
        context_management=[{"type": "compaction", "compact_threshold": total}],
    )
    assert len(engine.requests) == 1 and below.output_text == "4417."

    engine.reset(say(SUMMARY), say("4417."))
    above = client.responses.create(
        model=MODEL,
        input=CONVERSATION,  # type: ignore[arg-type]
        context_management=[
            {"type": "compaction", "compact_threshold": total - 1, "structured_outputs": {"regex": "x"}}
        ],
    )
    summarising, answering = engine.requests
    assert summarising.sampling.structured == {"regex": "x"} and answering.sampling.structured is None
    assert Message("user", f"{SUMMARY_HEADER}\n{SUMMARY}") in answering.turns
    assert FakeEngine.prompt_tokens(answering) < total // 2
    # the compaction item opens the output (a stateless client sends it back); the summary's tokens count
    assert above.output_text == "4417." and [it.type for it in above.output] == ["compaction", "message"]
    assert open_summary(above.output[0].encrypted_content) == SUMMARY  # type: ignore[union-attr]
    assert above.usage is not None and above.usage.input_tokens == sum(
        FakeEngine.prompt_tokens(r) for r in (summarising, answering)
    )
    # the stored history is the compacted one: the next turn starts from it
    assert (
        count(client, previous_response_id=above.id, input="Thanks!")
        < count(client, previous_response_id=below.id, input="Thanks!") // 2
    )


@pytest.mark.parametrize(
    "body,status,param",
    [
        ({"input": "hi"}, 400, "model"),
        ({"model": MODEL, "input": "hi", "previous_response_id": "resp_nope"}, 404, "previous_response_id"),
        ({"model": "gpt-9", "input": "hi"}, 404, "model"),
        ({"model": MODEL, "input": [{"role": "wizard", "content": "hi"}]}, 400, "input[0].role"),
        (
            {"model": MODEL, "input": [{"type": "compaction", "encrypted_content": "gAAAA-from-openai"}]},
            400,
            "input[0].encrypted_content",
        ),
        ([1], 400, "body"),
    ],
)
def test_compact_bad_requests(fake_server: LiveServer, body: object, status: int, param: str) -> None:
    r = httpx.post(fake_server.base_url + "/v1/responses/compact", json=body, timeout=10)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param


@pytest.mark.parametrize(
    "entry,param",
    [
        ({"type": "compaction"}, "context_management[0].compact_threshold"),
        ({"type": "compaction", "compact_threshold": 0}, "context_management[0].compact_threshold"),
        ({"type": "truncation", "compact_threshold": 10}, "context_management[0].type"),
    ],
)
def test_bad_context_management(fake_server: LiveServer, entry: dict[str, Any], param: str) -> None:
    body = {"model": MODEL, "input": "hi", "context_management": [entry]}
    r = httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=10)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_a_compaction_item_round_trips_through_create(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("ok"))
    item = {"type": "compaction", "encrypted_content": seal_summary("Ünïcode fact: π ≈ 3.14159")}
    client.responses.create(model=MODEL, input=[item, {"role": "user", "content": "and?"}])  # type: ignore[list-item]
    assert engine.requests[0].turns[0] == Message("user", f"{SUMMARY_HEADER}\nÜnïcode fact: π ≈ 3.14159")


@pytest.mark.parametrize(
    ("td", "model"),
    [(CompactionItem, ResponseCompactionItem), (CompactedResponseShape, CompactedResponse)],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_wire_shapes_match_the_sdk(td: Any, model: type[pydantic.BaseModel]) -> None:
    check_typed_dict(td, model)


def test_a_looping_summary_is_capped_and_its_repeats_dropped(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(say("Ada's code is 4417. It is mild.\nIt is mild. " * 400))
    compacted = client.responses.compact(model=MODEL, input=CONVERSATION)  # type: ignore[arg-type]
    (call,) = engine.requests
    assert call.sampling.max_tokens == int(FakeEngine.prompt_tokens(call) / 3)
    assert compacted.usage.output_tokens == call.sampling.max_tokens  # cut by the cap, as vLLM would
    item = compacted.output[-1]
    assert item.type == "compaction"
    assert open_summary(item.encrypted_content) == "Ada's code is 4417. It is mild."


def test_a_compacting_stream_adds_the_item_first_and_validates(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(say(SUMMARY), say("4417."))
    body = {
        "model": MODEL,
        "input": CONVERSATION,
        "stream": True,
        "context_management": [{"type": "compaction", "compact_threshold": 1}],
    }
    r = httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30)
    events = parse_sse(r.text)
    check_stream(events)
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added == ["compaction", "message"]
    # sent back by a client that keeps no state, the item stands for the earlier turns
    engine.reset(say("Yes."))
    final = events[-1]["response"]
    follow = [final["output"][0], {"role": "user", "content": "Still 4417?"}]
    httpx.post(fake_server.base_url + "/v1/responses", json={"model": MODEL, "input": follow}, timeout=30)
    assert engine.requests[0].turns[0] == Message("user", f"{SUMMARY_HEADER}\n{SUMMARY}")


def test_a_long_tool_loop_is_compacted_between_its_calls(client: openai.OpenAI, engine: FakeEngine) -> None:
    """`context_management` inside one response: once a later model call passes the threshold, the loop's
    older steps (all but the latest call and its result) are summarised by the model and the loop goes on
    from the summary; the response's items keep every step, and the summarising call counts in its usage."""
    first, second = "print('a' * 400)", "print('b' * 400)"
    engine.reset(code_call(first), code_call(second), say("Step one printed a's."), say("done"))
    r = client.responses.create(
        model=MODEL,
        input="go",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        context_management=[{"type": "compaction", "compact_threshold": 150}],  # type: ignore[list-item]
    )
    assert r.status == "completed" and r.output_text == "done"
    assert [it.type for it in r.output] == ["code_interpreter_call", "code_interpreter_call", "message"]
    summarising, after = engine.requests[2], engine.requests[3]
    assert summarising.tools == () and first in summarising.turns[-1].text  # type: ignore[union-attr]
    assert after.turns[0] == Message("user", f"{SUMMARY_HEADER}\nStep one printed a's.")
    assert after.turns[1] == Message("user", "go")
    assert [t.name for t in after.turns[2:]] == ["python", "python"] and second in after.turns[2].arguments  # type: ignore[union-attr]
    assert r.usage is not None and r.usage.output_tokens > sum(1 for _ in "done")  # the summary counted

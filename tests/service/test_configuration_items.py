"""The input items that steer a response over the scripted engine: `configuration_update` (its reasoning effort and
text format hold for the later turns of the context) and `compaction_trigger` (the context compacted first,
with `response.compaction.compacting`), through the real `openai` SDK."""

from __future__ import annotations

from typing import Any

import httpx
import openai
from openai.types.responses import ResponseCompactionCompactingEvent, ResponseConfigurationUpdateItem

from tests.context.test_compaction import CONVERSATION, SUMMARY
from tests.support.fakes import FakeEngine, say
from tests.support.serving import LiveServer
from tests.support.wire import (
    MESSAGE_EVENT_RUNS,
    check_stream,
    event_runs,
    parse_sse,
    validate_as,
    validate_response,
)
from vllm_responses.context.turns import SUMMARY_HEADER
from vllm_responses.engine.types import Message
from vllm_responses.protocol.compaction import open_summary

MODEL = "fake-model"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
JSON_FORMAT = {"type": "json_schema", "name": "count", "schema": SCHEMA, "strict": True}


def update(**fields: Any) -> Any:
    return {"type": "configuration_update", **fields}


def test_an_update_holds_for_the_later_turns(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("one"), say('{"n": 2}'), say('{"n": 3}'), say("four"))
    first = client.responses.create(model=MODEL, input="a", reasoning={"effort": "low"})
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        reasoning={"effort": "low"},
        input=[
            update(reasoning={"effort": "high"}, text={"format": JSON_FORMAT}),
            {"role": "user", "content": "b"},
        ],
    )
    third = client.responses.create(model=MODEL, previous_response_id=second.id, input="c")
    assert [q.reasoning_effort for q in engine.requests] == ["low", "high", "high"]
    assert [q.sampling.text_format for q in engine.requests] == [None, JSON_FORMAT, JSON_FORMAT]
    for r in (second, third):  # the echo says what the response ran with
        validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
        assert r.reasoning is not None and r.reasoning.effort == "high"
        assert r.text is not None and r.text.format is not None and r.text.format.type == "json_schema"
    # a later update replaces what it carries, and only that
    client.responses.create(
        model=MODEL,
        previous_response_id=third.id,
        input=[update(text={"format": {"type": "text"}}), {"role": "user", "content": "d"}],
    )
    assert engine.requests[-1].reasoning_effort == "high" and engine.requests[-1].sampling.text_format is None
    # the update is no turn the model reads
    assert all("configuration" not in repr(turn) for turn in engine.requests[-1].turns)


def test_an_update_in_a_conversation_and_among_its_items(client: openai.OpenAI, engine: FakeEngine) -> None:
    conversation = client.conversations.create(items=[update(reasoning={"effort": "minimal"})])
    engine.reset(say("ok"))
    client.responses.create(model=MODEL, conversation=conversation.id, input="hi")
    assert engine.requests[-1].reasoning_effort == "minimal"
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [item.type for item in items] == ["configuration_update", "message", "message"]
    item = items[0].model_dump(mode="json", exclude_unset=True, by_alias=True)
    assert item["id"].startswith("cfg_")
    validate_as(ResponseConfigurationUpdateItem, item)


def test_a_bad_update_is_a_400(fake_server: LiveServer) -> None:
    for bad, param in [
        (update(text={"format": {"type": "json_object"}}), "input[0].text"),
        (update(reasoning={"effort": "huge"}), "input[0].reasoning.effort"),
    ]:
        r = httpx.post(
            fake_server.base_url + "/v1/responses",
            json={"model": MODEL, "input": [bad, {"role": "user", "content": "x"}]},
        )
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"].startswith(param), error


# --- compaction_trigger ---------------------------------------------------------------------------------

TRIGGER: Any = {"type": "compaction_trigger"}


def test_a_trigger_compacts_the_context_first_and_streams_compacting(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(say(SUMMARY), say("4417."))
    body = {"model": MODEL, "input": [*CONVERSATION, TRIGGER], "stream": True}
    events = parse_sse(httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30).text)
    check_stream(events)
    assert event_runs(e["type"] for e in events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
        *MESSAGE_EVENT_RUNS,
        "response.completed",
    ]
    compaction = events[2]["item"]
    assert compaction["type"] == "compaction" and events[3]["item_id"] == compaction["id"]
    assert open_summary(compaction["encrypted_content"]) == SUMMARY
    # the summarising call, then the response's call on the compacted context
    assert len(engine.requests) == 2
    summary = Message("user", f"{SUMMARY_HEADER}\n{SUMMARY}")
    assert engine.requests[1].turns[:2] == (Message("developer", "Be brief."), summary)
    # the trigger is no item of the response's input, and a continuation starts from the summary
    done = events[-1]["response"]
    listed = httpx.get(f"{fake_server.base_url}/v1/responses/{done['id']}/input_items", timeout=30).json()
    assert "compaction_trigger" not in [item["type"] for item in listed["data"]]
    engine.reset(say("Yes."))
    body = {"model": MODEL, "previous_response_id": done["id"], "input": "Still 4417?"}
    httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30).raise_for_status()
    assert engine.requests[0].turns[:2] == (Message("developer", "Be brief."), summary)


def test_the_sdk_stream_helper_types_the_compacting_event(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say(SUMMARY), say("4417."))
    with client.responses.stream(model=MODEL, input=[*CONVERSATION, TRIGGER]) as stream:
        seen = list(stream)
        final = stream.get_final_response()
    assert any(isinstance(e, ResponseCompactionCompactingEvent) for e in seen)
    assert [item.type for item in final.output] == ["compaction", "message"]


def test_a_trigger_that_is_not_last_is_a_400(fake_server: LiveServer) -> None:
    body = {"model": MODEL, "input": [TRIGGER, {"role": "user", "content": "x"}]}
    r = httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "input[0]"


def test_a_trigger_is_no_conversation_item(fake_server: LiveServer) -> None:
    r = httpx.post(fake_server.base_url + "/v1/conversations", json={"items": [TRIGGER]}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "items[0].type"

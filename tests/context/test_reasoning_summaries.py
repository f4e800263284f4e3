"""`reasoning.summary` on a real server over the scripted engine: each mode's summary part and its four stream
events, a `concise` summary written by the model in a call of its own, and the summary kept and given back
(retrieve, `previous_response_id`, input, WebSocket, the SDK's stream helper)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from websockets.sync.client import connect

from tests.support.fakes import FakeEngine, say, think
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse
from vllm_responses.config import Config
from vllm_responses.context.reasoning_summary import SUMMARY_SYSTEM
from vllm_responses.engine.types import Message

MODEL = "fake-model"
THOUGHT = "The user wants a greeting. A short one will do."
LONG = " ".join(f"Step {i}: weigh option {i} against the others and keep the better one." for i in range(20))
SUMMARY = "Compared the options and kept the best."
SUMMARY_EVENTS = (
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
)


def stream(server: LiveServer, **body: Any) -> list[dict[str, Any]]:
    """A streamed create's events, checked as one stream (each validated against the SDK's types)."""
    r = httpx.post(
        f"{server.base_url}/v1/responses",
        json={"model": MODEL, "input": "Say hi.", "stream": True, **body},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    check_stream(events)
    return events


def reasoning_events(events: list[dict[str, Any]]) -> list[str]:
    """The types of the events about the reasoning item (output 0), with runs of deltas folded to one."""
    kinds: list[str] = []
    for e in events:
        if e.get("output_index") != 0:
            continue
        kind = e["type"]
        if kind.endswith(".delta") and kinds and kinds[-1] == kind:
            continue
        kinds.append(kind)
    return kinds


def final_item(events: list[dict[str, Any]]) -> dict[str, Any]:
    item: dict[str, Any] = events[-1]["response"]["output"][0]
    assert item["type"] == "reasoning"
    return item


@pytest.mark.parametrize(
    "reasoning", [{"summary": "detailed"}, {"summary": "auto"}, {"generate_summary": "auto"}]
)
def test_auto_and_detailed_stream_the_reasoning_as_its_summary(
    fake_server: LiveServer, engine: FakeEngine, reasoning: dict[str, str]
) -> None:
    engine.reset([*think(THOUGHT), *say("Hi!")])
    events = stream(fake_server, reasoning=reasoning)

    # each reasoning delta has its summary delta beside it, and the summary closes after the reasoning text
    assert reasoning_events(events) == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_text.delta", "response.reasoning_summary_text.delta"] * len(think(THOUGHT)),
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    deltas = [e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"]
    assert "".join(deltas) == THOUGHT
    done = next(e for e in events if e["type"] == "response.reasoning_summary_part.done")
    assert done["summary_index"] == 0 and done["part"] == {"type": "summary_text", "text": THOUGHT}
    assert final_item(events)["summary"] == [{"type": "summary_text", "text": THOUGHT}]
    assert len(engine.requests) == 1  # no call of its own


def test_without_a_summary_nothing_changes(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset([*think(THOUGHT), *say("Hi!")])
    events = stream(fake_server)

    assert not [e for e in events if e["type"] in SUMMARY_EVENTS]
    assert final_item(events)["summary"] == []


def test_concise_keeps_short_reasoning_as_its_own_summary(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    assert len(THOUGHT) <= fake_server.config.concise_summary_over == 600
    engine.reset([*think(THOUGHT), *say("Hi!")])
    events = stream(fake_server, reasoning={"summary": "concise"})

    summary = [e for e in events if e["type"] in SUMMARY_EVENTS]
    assert [e["type"] for e in summary] == list(SUMMARY_EVENTS)
    assert summary[1]["delta"] == THOUGHT and summary[2]["text"] == THOUGHT
    assert final_item(events)["summary"] == [{"type": "summary_text", "text": THOUGHT}]
    assert len(engine.requests) == 1


def test_concise_summarises_long_reasoning_in_a_model_call_of_its_own(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    assert len(LONG) > fake_server.config.concise_summary_over
    engine.reset([*think(LONG), *say("Hi!")], say(SUMMARY))
    events = stream(fake_server, reasoning={"summary": "concise"})

    kinds = reasoning_events(events)
    # the reasoning streams as it is, then its summary comes whole before the item is done
    assert kinds == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        *SUMMARY_EVENTS,
        "response.output_item.done",
    ]
    item = final_item(events)
    assert item["summary"] == [{"type": "summary_text", "text": SUMMARY}]
    assert item["content"] == [{"type": "reasoning_text", "text": LONG}]
    assert events[-1]["response"]["output"][1]["content"][0]["text"] == "Hi!"
    # the second call: the fixed summarising instruction and the reasoning, no reasoning of its own
    assert len(engine.requests) == 2
    call = engine.requests[1]
    assert call.turns[0] == Message("system", SUMMARY_SYSTEM)
    assert LONG in call.turns[1].text  # type: ignore[union-attr]
    assert call.reasoning_effort == "none" and call.tools == ()
    # its tokens are counted (the fake engine counts one output token a delta)
    usage = events[-1]["response"]["usage"]
    assert usage["output_tokens"] == len(think(LONG)) + len(say("Hi!")) - 1 + len(say(SUMMARY)) - 1


def test_summaries_are_kept_and_given_back(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset([*think(THOUGHT), *say("Hi!")], say("Again."))
    first = client.responses.create(model=MODEL, input="Say hi.", reasoning={"summary": "detailed"})
    kept = client.responses.retrieve(first.id)
    summary = kept.output[0].model_dump()["summary"]
    assert summary == [{"type": "summary_text", "text": THOUGHT}]

    later = client.responses.create(model=MODEL, previous_response_id=first.id, input="Again.")
    items: Any = [
        {"role": "user", "content": "Say hi."},
        *[it.model_dump(exclude_none=True) for it in kept.output],
        {"role": "user", "content": "Again."},
    ]
    sent_back = client.responses.create(model=MODEL, input=items)
    assert later.status == "completed" and sent_back.status == "completed"
    listed = client.responses.input_items.list(sent_back.id)
    reasoning = next(it for it in listed.data if it.type == "reasoning")
    assert reasoning.model_dump()["summary"] == summary


def test_the_sdk_stream_helper_takes_the_summary_events(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset([*think(THOUGHT), *say("Hi!")])
    deltas: list[str] = []
    with client.responses.stream(model=MODEL, input="Say hi.", reasoning={"summary": "auto"}) as s:
        for event in s:
            if event.type == "response.reasoning_summary_text.delta":
                deltas.append(event.delta)
        final = s.get_final_response()

    assert "".join(deltas) == THOUGHT
    assert final.output[0].type == "reasoning"
    assert [p.text for p in final.output[0].summary] == [THOUGHT]
    assert final.output_text == "Hi!"


def test_websocket_mode_streams_the_summary(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset([*think(THOUGHT), *say("Hi!")])
    with connect(f"ws://127.0.0.1:{fake_server.port}/v1/responses", open_timeout=10) as ws:
        ws.send(
            json.dumps(
                {
                    "type": "response.create",
                    "model": MODEL,
                    "input": "Say hi.",
                    "reasoning": {"summary": "auto"},
                }
            )
        )
        events = []
        while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(json.loads(ws.recv(timeout=30)))
    plain = [{k: v for k, v in e.items() if k != "stream_id"} for e in events]
    check_stream(plain)
    assert [e["type"] for e in plain if e["type"] in SUMMARY_EVENTS][0] == SUMMARY_EVENTS[0]
    assert final_item(plain)["summary"] == [{"type": "summary_text", "text": THOUGHT}]


@pytest.fixture(scope="module")
def low_threshold() -> Iterator[LiveServer]:
    live = LiveServer(Config(concise_summary_over=10), FakeEngine(), None)
    live.start()
    yield live
    live.stop()


def test_the_concise_threshold_is_a_setting(low_threshold: LiveServer) -> None:
    engine: FakeEngine = low_threshold.engine
    engine.reset([*think(THOUGHT), *say("Hi!")], say(SUMMARY))
    events = stream(low_threshold, reasoning={"summary": "concise"})

    assert final_item(events)["summary"] == [{"type": "summary_text", "text": SUMMARY}]
    assert len(engine.requests) == 2

"""Custom tools over the scripted engine, through the openai SDK and raw SSE: `custom_tool_call` items and their
input events as the SDK types them, the client's `custom_tool_call_output`, forced custom calls, and the 400s."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest
from openai.types.conversations import ConversationItemList
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseCustomToolCallItem,
    ResponseCustomToolCallOutputItem,
)

from tests.support.fakes import FakeEngine, chunks, function_call, say
from tests.support.metrics_text import parse, value
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, event_runs, parse_sse, validate_as, validate_response
from vllm_responses.engine.types import (
    EngineEvent,
    Finish,
    ForcedTool,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    Usage,
)
from vllm_responses.tools.functions import CUSTOM_PARAMETERS

MODEL = "fake-model"
SQL = {
    "type": "custom",
    "name": "run_sql",
    "description": "Run a SQL query.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "SELECT " NAME\nNAME: /[a-z]+/'},
}
FREEFORM = {"type": "custom", "name": "shell", "description": "Run a shell command."}
QUERY = 'SELECT "names"\nfrom t'  # quotes and a newline: escaped in the arguments, plain in the input


def custom_call(name: str, text: str, *, arguments: str | None = None) -> list[EngineEvent]:
    args = json.dumps({"input": text}) if arguments is None else arguments
    events: list[EngineEvent] = [ToolCallStart(0, name)]
    events += [ToolCallDelta(0, c) for c in chunks(args, 5)]
    return [*events, ToolCallEnd(0), Finish("tool_calls", Usage())]


def post(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/responses", json={"model": MODEL, **body}, timeout=30)


def test_a_custom_call_and_its_output_round_trip(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(custom_call("run_sql", QUERY), say("There are 3 names."))
    first = client.responses.create(model=MODEL, input="How many names?", tools=[SQL, FREEFORM])  # type: ignore[list-item]
    assert first.status == "completed"
    validate_response(first.model_dump(mode="json", exclude_unset=True, by_alias=True))
    (call,) = first.output
    assert isinstance(call, ResponseCustomToolCall)
    assert (call.name, call.input) == ("run_sql", QUERY) and call.call_id.startswith("call_")
    assert [t.type for t in first.tools] == ["custom", "custom"] and first.tools[0].format is not None
    # The model was offered each as a function taking one string; the grammar is in the description.
    offered = {t.name: t for t in engine.requests[0].tools}
    assert offered["run_sql"].custom and offered["run_sql"].parameters == CUSTOM_PARAMETERS
    assert offered["run_sql"].grammar == ("lark", SQL["format"]["definition"])  # type: ignore[index]
    assert "NAME: /[a-z]+/" in offered["run_sql"].description
    assert offered["shell"].grammar is None and offered["shell"].description == "Run a shell command."
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "custom_tool_call_output", "call_id": call.call_id, "output": "3"}],
        tools=[SQL],  # type: ignore[list-item]
    )
    assert second.output_text == "There are 3 names."
    turns = engine.requests[1].turns
    assert turns[-2] == ToolCall(call.call_id, "run_sql", json.dumps({"input": QUERY}))
    assert turns[-1] == ToolResult(call.call_id, "run_sql", "3")
    listed = client.responses.input_items.list(second.id).data
    assert [it.type for it in listed] == ["custom_tool_call_output"]


def test_a_custom_call_streams_its_input(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(custom_call("run_sql", QUERY))
    r = post(fake_server, {"input": "q", "tools": [SQL], "stream": True})
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    check_stream(events)
    assert event_runs(e["type"] for e in events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [
        validate_as(ResponseCustomToolCallInputDeltaEvent, e) for e in events if e["type"].endswith(".delta")
    ]
    assert len(deltas) > 1 and "".join(d.delta for d in deltas) == QUERY
    (done,) = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert validate_as(ResponseCustomToolCallInputDoneEvent, done).input == QUERY
    added = events[2]["item"]
    assert added == {**events[-2]["item"], "input": ""} and added["type"] == "custom_tool_call"
    assert events[-1]["response"]["output"] == [events[-2]["item"]]


def test_the_sdk_stream_helper_reads_a_custom_call(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(custom_call("shell", "ls -la /tmp"))
    with client.responses.stream(model=MODEL, input="list", tools=[FREEFORM]) as stream:  # type: ignore[list-item]
        types = [ev.type for ev in stream]
        final = stream.get_final_response()
    assert "response.custom_tool_call_input.done" in types
    (call,) = final.output
    assert isinstance(call, ResponseCustomToolCall) and call.input == "ls -la /tmp"


def test_a_stateless_client_resends_the_call_with_its_output(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(say("Done."))
    call = {"type": "custom_tool_call", "call_id": "call_1", "name": "shell", "input": "echo hi"}
    out = {
        "type": "custom_tool_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_text", "text": "hi"}],
    }
    resp = client.responses.create(model=MODEL, input=[call, out], tools=[FREEFORM])  # type: ignore[list-item]
    assert resp.output_text == "Done."
    assert engine.requests[0].turns == (
        ToolCall("call_1", "shell", json.dumps({"input": "echo hi"})),
        ToolResult("call_1", "shell", "hi"),
    )
    listed = client.responses.input_items.list(resp.id, order="asc").data
    assert [it.type for it in listed] == ["custom_tool_call", "custom_tool_call_output"]
    assert listed[0].id is not None and listed[0].id.startswith("ctc_")
    page = httpx.get(f"{client.base_url}responses/{resp.id}/input_items?order=asc").json()
    for item in page["data"]:  # as the SDK types a listed item (with its status), no field it does not know
        validate_as(
            ResponseCustomToolCallItem
            if item["type"] == "custom_tool_call"
            else ResponseCustomToolCallOutputItem,
            item,
        )


def test_tool_choice_custom_forces_the_named_tool(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(custom_call("shell", "pwd"))
    choice = {"type": "custom", "name": "shell"}
    resp = client.responses.create(model=MODEL, input="where?", tools=[SQL, FREEFORM], tool_choice=choice)  # type: ignore[arg-type, list-item]
    assert engine.requests[0].tool_choice == ForcedTool("shell")
    assert resp.tool_choice.type == "custom" and resp.tool_choice.name == "shell"  # type: ignore[union-attr]
    allowed = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "custom", "name": "run_sql"}]}
    engine.reset(custom_call("run_sql", "SELECT a"))
    client.responses.create(model=MODEL, input="q", tools=[SQL, FREEFORM], tool_choice=allowed)  # type: ignore[arg-type, list-item]
    assert [t.name for t in engine.requests[0].tools] == ["run_sql"]


def test_input_written_under_another_key_or_as_text_is_kept(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    for arguments, expected in (
        ('{"command": "ls"}', "ls"),
        ("ls /", "ls /"),
        ('{"a": 1, "b": 2}', '{"a": 1, "b": 2}'),
    ):
        engine.reset(custom_call("shell", "", arguments=arguments))
        (call,) = client.responses.create(model=MODEL, input="x", tools=[FREEFORM]).output  # type: ignore[list-item]
        assert isinstance(call, ResponseCustomToolCall) and call.input == expected


def test_custom_and_function_calls_in_one_turn(client: openai.OpenAI, engine: FakeEngine) -> None:
    fn = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    script = function_call("f", {}, finish=False) + [
        ToolCallStart(1, "shell"),
        ToolCallDelta(1, '{"input": "x"}'),
        ToolCallEnd(1),
        Finish("tool_calls", Usage()),
    ]
    engine.reset(script)
    resp = client.responses.create(model=MODEL, input="both", tools=[fn, FREEFORM])  # type: ignore[list-item]
    assert [it.type for it in resp.output] == ["function_call", "custom_tool_call"]


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        (
            {**SQL, "format": {"type": "grammar", "syntax": "ebnf", "definition": "root ::= 'a'"}},
            "tools[0].format.syntax",
        ),
        ({**SQL, "format": {"type": "grammar", "syntax": "regex"}}, "tools[0].format.definition"),
        (
            {**SQL, "format": {"type": "grammar", "syntax": "regex", "definition": "[0-9"}},
            "tools[0].format.definition",
        ),
        (
            {**SQL, "format": {"type": "grammar", "syntax": "lark", "definition": "start: ("}},
            "tools[0].format.definition",
        ),
        ({**SQL, "format": {"type": "json"}}, "tools[0].format.type"),
        ({**SQL, "name": "bad name"}, "tools[0].name"),
    ],
)
def test_a_bad_custom_tool_is_a_400(fake_server: LiveServer, tool: dict[str, Any], param: str) -> None:
    r = post(fake_server, {"input": "x", "tools": [tool]})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_refused_choices_and_outputs(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(say("ok"))
    fn = {"type": "function", "name": "shell", "parameters": {}}
    cases = [
        ({"tools": [FREEFORM], "tool_choice": {"type": "custom", "name": "nope"}}, "tool_choice"),
        ({"tools": [FREEFORM, fn]}, "tools"),  # a name used twice
        ({"tools": [FREEFORM], "tool_choice": {"type": "function", "name": "shell"}}, "tool_choice"),
        (
            {
                "tools": [FREEFORM],
                "input": [{"type": "custom_tool_call_output", "call_id": "call_x", "output": "1"}],
            },
            "input",
        ),
        (  # a function call does not take a custom tool call's output
            {
                "tools": [FREEFORM],
                "input": [
                    {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
                    {"type": "custom_tool_call_output", "call_id": "c1", "output": "1"},
                ],
            },
            "input",
        ),
    ]
    for body, param in cases:
        r = post(fake_server, {"input": "x", **body})
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["param"] == param, body
    r = post(
        fake_server, {"input": [{"type": "custom_tool_call_output", "call_id": "call_x", "output": "1"}]}
    )
    assert (
        "No tool call found for custom tool call output with call_id call_x" in r.json()["error"]["message"]
    )


def test_custom_calls_are_counted(fake_server: LiveServer, client: openai.OpenAI, engine: FakeEngine) -> None:
    def count() -> float:
        samples, _ = parse(httpx.get(fake_server.base_url + "/metrics", timeout=30).text)
        return value(samples, "vllm_responses_tool_calls_total", type="custom", outcome="returned")

    before = count()
    engine.reset(custom_call("shell", "ls"))
    client.responses.create(model=MODEL, input="x", tools=[FREEFORM])  # type: ignore[list-item]
    deadline = time.monotonic() + 10  # counted when the run ends, just after the reply
    while count() != before + 1:
        assert time.monotonic() < deadline, "the custom call was not counted"
        time.sleep(0.02)


def test_custom_calls_in_a_conversation(client: openai.OpenAI, engine: FakeEngine) -> None:
    conv = client.conversations.create()
    engine.reset(custom_call("shell", "uptime"), say("Up 3 days."))
    first = client.responses.create(model=MODEL, input="Uptime?", tools=[FREEFORM], conversation=conv.id)  # type: ignore[list-item]
    (call,) = first.output
    assert isinstance(call, ResponseCustomToolCall)
    answer = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "up 3 days"}
    second = client.responses.create(model=MODEL, input=[answer], tools=[FREEFORM], conversation=conv.id)  # type: ignore[list-item]
    assert second.output_text == "Up 3 days."
    assert engine.requests[1].turns[-2:] == (
        ToolCall(call.call_id, "shell", json.dumps({"input": "uptime"})),
        ToolResult(call.call_id, "shell", "up 3 days"),
    )
    body = httpx.get(
        f"{client.base_url}conversations/{conv.id}/items", params={"order": "asc"}, timeout=10
    ).json()
    validate_as(ConversationItemList, body)  # as the SDK types them, no field it does not know
    assert [it["type"] for it in body["data"]] == [
        "message",
        "custom_tool_call",
        "custom_tool_call_output",
        "message",
    ]

"""`namespace` tools over the scripted engine, through the openai SDK and raw SSE: the model offered each inner
tool as `namespace__name`, its calls' items carrying `namespace` and the tool's own name as the SDK types
them, their outputs sent back (stored or resent), `tool_choice` naming `namespace.name`; and the other tools and
fields Codex CLI sends on every request (`web_search` without a backend, `client_metadata`)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
)

from tests.support.fakes import FakeEngine, function_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_as, validate_response
from tests.tools.test_functions import custom_call
from vllm_responses.engine.types import ForcedTool, ToolCall, ToolResult

MODEL = "fake-model"
CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "The customer database.",
    "tools": [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find a customer by name.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            "strict": True,
        },
        {"type": "custom", "name": "query", "description": "Run a free-form query."},
    ],
}
TOP = {"type": "function", "name": "lookup", "description": "A top-level tool of the same name."}


def post(server: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/responses", json={"model": MODEL, **body}, timeout=30)


def test_a_namespaced_call_and_its_output_round_trip(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(function_call("crm__lookup", {"name": "Ada"}), say("Ada is a customer."))
    first = client.responses.create(model=MODEL, input="Is Ada a customer?", tools=[CRM, TOP])  # type: ignore[list-item]
    validate_response(first.model_dump(mode="json", exclude_unset=True, by_alias=True))
    (call,) = first.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.name, call.namespace, call.arguments) == ("lookup", "crm", '{"name": "Ada"}')
    assert [t.type for t in first.tools] == ["namespace", "function"]
    offered = {t.name: t for t in engine.requests[0].tools}
    assert set(offered) == {"crm__lookup", "crm__query", "lookup"}
    assert offered["crm__lookup"].description == "[crm: The customer database.] Find a customer by name."
    assert offered["crm__lookup"].strict and offered["crm__lookup"].namespace == "crm"
    assert offered["crm__query"].custom and offered["lookup"].namespace is None
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "yes"}],
        tools=[CRM],  # type: ignore[list-item]
    )
    assert second.output_text == "Ada is a customer."
    turns = engine.requests[1].turns
    assert ToolCall(call.call_id, "crm__lookup", '{"name": "Ada"}') in turns
    assert ToolResult(call.call_id, "crm__lookup", "yes") in turns


def test_a_stateless_client_resends_the_namespaced_call(client: openai.OpenAI, engine: FakeEngine) -> None:
    """`store: false`, as Codex sends it: the call item comes back with its namespace, the model sees the
    name it was offered."""
    engine.reset(say("Done."))
    client.responses.create(
        model=MODEL,
        store=False,
        tools=[CRM],  # type: ignore[list-item]
        input=[
            {"role": "user", "content": "Look up Ada."},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "lookup",
                "namespace": "crm",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "found"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "query", "namespace": "crm", "input": "q"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "rows"},
        ],  # type: ignore[list-item]
    )
    turns = engine.requests[0].turns
    assert (
        ToolResult("c1", "crm__lookup", "found") in turns and ToolResult("c2", "crm__query", "rows") in turns
    )
    assert ToolCall("c2", "crm__query", '{"input": "q"}') in turns


def test_a_namespaced_custom_call_streams_with_its_namespace(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(custom_call("crm__query", "select 1"))
    r = post(fake_server, {"input": "q", "tools": [CRM], "stream": True})
    events = parse_sse(r.text)
    check_stream(events)
    done = [e for e in events if e["type"] == "response.output_item.done"]
    item = validate_as(ResponseOutputItemDoneEvent, done[0]).item
    assert isinstance(item, ResponseCustomToolCall)
    assert (item.name, item.namespace, item.input) == ("query", "crm", "select 1")


def test_a_namespaced_function_call_streams_as_the_sdk_types_it(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(function_call("crm__lookup", {"name": "Ada"}))
    events = parse_sse(post(fake_server, {"input": "q", "tools": [CRM], "stream": True}).text)
    check_stream(events)
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["namespace"] == "crm" and added["item"]["name"] == "lookup"
    args = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    validate_as(ResponseFunctionCallArgumentsDoneEvent, args)


def test_tool_choice_names_a_namespaced_tool_by_namespace_dot_name(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(function_call("crm__lookup", {"name": "Ada"}))
    r = client.responses.create(
        model=MODEL,
        input="q",
        tools=[CRM],
        tool_choice={"type": "function", "name": "crm.lookup"},  # type: ignore[list-item]
    )
    assert engine.requests[0].tool_choice == ForcedTool("crm__lookup")
    assert r.tool_choice.name == "crm.lookup"  # type: ignore[union-attr]
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "custom", "name": "crm.query"}]}
    client.responses.create(model=MODEL, input="q", tools=[CRM, TOP], tool_choice=allowed)  # type: ignore[list-item, arg-type]
    assert [t.name for t in engine.requests[1].tools] == ["crm__query"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            {"tools": [CRM], "tool_choice": {"type": "function", "name": "lookup"}},
            "tool_choice",
        ),  # bare inner
        (
            {"tools": [CRM], "tool_choice": {"type": "function", "name": "crm"}},
            "tool_choice",
        ),  # the namespace
        (
            {"tools": [CRM, {"type": "function", "name": "crm__lookup"}]},
            "tools",
        ),  # the same model-facing name
        ({"tools": [{**CRM, "tools": []}]}, "tools[0].tools"),
        ({"tools": [{**CRM, "name": "a.b"}]}, "tools[0].name"),
        ({"tools": [{k: v for k, v in CRM.items() if k != "description"}]}, "tools[0].description"),
        ({"tools": [{**CRM, "tools": [{"type": "mcp", "server_label": "x"}]}]}, "tools[0].tools[0]"),
    ],
)
def test_bad_namespaces_are_a_400(fake_server: LiveServer, body: dict[str, Any], param: str) -> None:
    r = post(fake_server, {"input": "q", **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"].startswith(param), r.json()


def test_web_search_without_a_backend_is_accepted_and_not_offered(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(say("No search here."))
    tools = [
        {"type": "web_search", "external_web_access": False},
        {"type": "web_search_preview", "search_context_size": "low"},
        {"type": "function", "name": "f"},
    ]
    r = client.responses.create(model=MODEL, input="q", tools=tools)  # type: ignore[arg-type]
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert [t.type for t in r.tools] == ["web_search", "web_search_preview", "function"]
    assert [t.name for t in engine.requests[0].tools] == ["f"]


def test_the_fields_codex_sends_are_accepted(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("ok"))
    r = client.responses.create(
        model=MODEL,
        input=[{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        store=False,
        include=["reasoning.encrypted_content"],
        reasoning={"summary": "auto"},
        prompt_cache_key="session-1",
        parallel_tool_calls=True,
        extra_body={"client_metadata": {"session_id": "s", "turn_id": "t"}},
    )
    assert r.status == "completed" and r.prompt_cache_key == "session-1"

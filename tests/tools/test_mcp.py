"""Remote MCP tools over the scripted engine and a real MCP server (the `mcp` SDK's, on 127.0.0.1), through the
openai SDK and raw SSE: listing, calls, failures as tool errors, approvals, reuse of a listing across turns,
filters, headers, the URL allow-list, and every item and event as the SDK types them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pydantic
import pytest
from openai.types.conversations import ConversationItem
from openai.types.responses import ResponseItem, ResponseOutputItem
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall, McpListTools

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.mcp_server import McpTestServer
from tests.support.serving import LiveServer
from tests.support.wire import _no_extras, check_stream, event_runs, parse_sse, validate_as, validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import ForcedTool, ToolCall, ToolResult

MODEL = "fake-model"
_OUTPUT_ITEM: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseOutputItem)
_ITEM: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseItem)
_CONVERSATION_ITEM: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ConversationItem)


@pytest.fixture(scope="module")
def live(mcp_server: McpTestServer) -> Iterator[LiveServer]:
    config = Config(mcp_timeout=3.0, mcp_allowed_urls=(mcp_server.url, "http://127.0.0.1:1/"))
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


@pytest.fixture
def engine(live: LiveServer) -> FakeEngine:
    live.engine.reset()
    return live.engine  # type: ignore[no-any-return]


@pytest.fixture
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def mcp_tool(server: McpTestServer, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": "never",
        **extra,
    }


def post(live: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(live.base_url + "/v1/responses", json={"model": MODEL, **body}, timeout=60)


def checked(response: openai.types.responses.Response) -> openai.types.responses.Response:
    """The response, validated field by field against the SDK types."""
    validate_response(response.model_dump(mode="json", exclude_unset=True, by_alias=True))
    return response


def test_list_call_and_answer(client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer) -> None:
    engine.reset(function_call("add", {"a": 2, "b": 3}), say("It is 5."))
    r = checked(client.responses.create(model=MODEL, input="2+3?", tools=[mcp_tool(mcp_server)]))  # type: ignore[list-item]
    assert r.status == "completed"
    listing, call, message = r.output
    assert isinstance(listing, McpListTools) and listing.server_label == "calc" and listing.error is None
    assert [t.name for t in listing.tools] == ["add", "fail", "slow", "whoami"]
    add = listing.tools[0]
    assert add.description == "Add two numbers." and add.input_schema["required"] == ["a", "b"]  # type: ignore[index]
    assert add.annotations == {"readOnlyHint": True}
    assert isinstance(call, McpCall) and (call.name, call.server_label, call.status) == (
        "add",
        "calc",
        "completed",
    )
    assert json.loads(call.arguments) == {"a": 2, "b": 3} and call.output == "5.0" and call.error is None
    assert message.type == "message" and r.output_text == "It is 5."
    # The model was offered the server's tools as functions; the result came back to it as a tool result.
    first, second = engine.requests
    assert [t.name for t in first.tools] == ["add", "fail", "slow", "whoami"]
    assert first.tools[0].parameters == add.input_schema
    assert second.turns[-2:] == (ToolCall(call.id, "add", call.arguments), ToolResult(call.id, "add", "5.0"))
    # The headers were not echoed (nor stored): they may hold credentials.
    assert r.tools[0].type == "mcp" and r.tools[0].headers is None


def test_the_stream_of_a_listing_and_a_call(
    live: LiveServer, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 1}), say("2"))
    r = post(live, {"input": "1+1", "tools": [mcp_tool(mcp_server)], "stream": True})
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    check_stream(events)
    runs = event_runs(e["type"] for e in events)
    assert runs[:11] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ]
    assert runs[11] == "response.output_item.done" and runs[-1] == "response.completed"
    deltas = [e["delta"] for e in events if e["type"] == "response.mcp_call_arguments.delta"]
    (done,) = [e for e in events if e["type"] == "response.mcp_call_arguments.done"]
    assert len(deltas) > 1 and "".join(deltas) == done["arguments"] == '{"a": 1, "b": 1}'
    items = [
        validate_as(McpCall, e["item"])
        for e in events
        if e["type"].startswith("response.output_item") and e["item"]["type"] == "mcp_call"
    ]
    assert [i.status for i in items] == ["in_progress", "completed"]


def test_the_sdk_stream_helper_accepts_mcp_events(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 2}), say("3"))
    with client.responses.stream(model=MODEL, input="1+2", tools=[mcp_tool(mcp_server)]) as stream:  # type: ignore[list-item]
        types = [ev.type for ev in stream]
        final = stream.get_final_response()
    assert "response.mcp_call.completed" in types and "response.mcp_list_tools.completed" in types
    assert [i.type for i in final.output] == ["mcp_list_tools", "mcp_call", "message"]


@pytest.mark.parametrize(
    ("arguments", "kind", "text"),
    [
        ({"name": "fail", "args": {"reason": "x"}}, "mcp_tool_execution_error", "Error executing tool fail"),
        ({"name": "add", "args": {"a": "two"}}, "mcp_tool_execution_error", "validation error"),
        ({"name": "slow", "args": {"seconds": 30}}, "mcp_protocol_error", "did not answer within 3 s"),
    ],
)
def test_a_failing_call_is_an_error_the_model_reads(
    client: openai.OpenAI,
    engine: FakeEngine,
    mcp_server: McpTestServer,
    arguments: dict[str, Any],
    kind: str,
    text: str,
) -> None:
    engine.reset(function_call(arguments["name"], arguments["args"]), say("Sorry."))
    r = checked(client.responses.create(model=MODEL, input="go", tools=[mcp_tool(mcp_server)]))  # type: ignore[list-item]
    assert r.status == "completed" and r.output_text == "Sorry."
    call = r.output[1]
    assert isinstance(call, McpCall) and call.status == "failed" and call.output is None
    assert call.error is not None and call.error.type == kind
    result = engine.requests[1].turns[-1]
    assert isinstance(result, ToolResult) and result.output.startswith("Error: ") and text in result.output


def test_arguments_that_are_not_json_are_an_error_the_model_reads(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    from vllm_responses.engine.types import Finish, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage

    engine.reset(
        [
            ToolCallStart(0, "add"),
            ToolCallDelta(0, "{not json"),
            ToolCallEnd(0),
            Finish("tool_calls", Usage()),
        ],
        say("ok"),
    )
    r = checked(client.responses.create(model=MODEL, input="go", tools=[mcp_tool(mcp_server)]))  # type: ignore[list-item]
    call = r.output[1]
    assert isinstance(call, McpCall) and call.status == "failed" and call.error is not None
    assert call.error.type == "mcp_protocol_error" and call.error.code == -32602
    assert r.status == "completed"


def test_a_server_that_is_down_fails_its_listing_not_the_response(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(say("No tools today."))
    down = {"type": "mcp", "server_label": "down", "server_url": "http://127.0.0.1:1/mcp"}
    r = checked(client.responses.create(model=MODEL, input="hi", tools=[down]))  # type: ignore[list-item]
    assert r.status == "completed" and r.output_text == "No tools today."
    listing = r.output[0]
    assert isinstance(listing, McpListTools) and listing.tools == []
    assert listing.error is not None and "Could not connect to the MCP server 'down'." in listing.error
    assert engine.requests[0].tools == ()


def test_the_listing_is_reused_across_turns(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(say("Hi."), function_call("add", {"a": 4, "b": 4}), say("8"))
    first = client.responses.create(model=MODEL, input="hi", tools=[mcp_tool(mcp_server)])  # type: ignore[list-item]
    lists = mcp_server.count("tools/list")
    second = checked(
        client.responses.create(
            model=MODEL,
            input="4+4",
            previous_response_id=first.id,
            tools=[mcp_tool(mcp_server)],  # type: ignore[list-item]
        )
    )
    assert mcp_server.count("tools/list") == lists  # not listed again, not even for the call
    assert [i.type for i in second.output] == ["mcp_call", "message"] and second.output_text == "8"
    assert [t.name for t in engine.requests[1].tools] == ["add", "fail", "slow", "whoami"]
    # Sent back by a stateless client, the listing is reused as well.
    items = [i.model_dump(exclude_none=True) for i in first.output]
    engine.reset(say("Again."))
    third = client.responses.create(
        model=MODEL, input=[*items, {"role": "user", "content": "hi"}], tools=[mcp_tool(mcp_server)]
    )  # type: ignore[list-item]
    assert mcp_server.count("tools/list") == lists and [i.type for i in third.output] == ["message"]


def test_allowed_tools_filters_what_is_offered(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(say("ok"), say("ok"))
    r = client.responses.create(
        model=MODEL, input="hi", tools=[mcp_tool(mcp_server, allowed_tools=["add", "slow"])]
    )  # type: ignore[list-item]
    assert [t.name for t in engine.requests[0].tools] == ["add", "slow"]
    assert len(r.output[0].tools) == 4  # type: ignore[union-attr]  # the listing shows them all
    client.responses.create(
        model=MODEL, input="hi", tools=[mcp_tool(mcp_server, allowed_tools={"read_only": True})]
    )  # type: ignore[list-item]
    assert [t.name for t in engine.requests[1].tools] == ["add"]


def test_tool_choice_allowed_tools_names_mcp_tools(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer, live: LiveServer
) -> None:
    engine.reset(say("ok"))
    fn = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    allowed = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "mcp", "server_label": "calc", "name": "add"}],
    }
    client.responses.create(model=MODEL, input="hi", tools=[fn, mcp_tool(mcp_server)], tool_choice=allowed)  # type: ignore[arg-type, list-item]
    assert [t.name for t in engine.requests[0].tools] == ["add"] and engine.requests[
        0
    ].tool_choice == "required"
    allowed["tools"] = [{"type": "mcp", "server_label": "nope"}]
    r = post(live, {"input": "hi", "tools": [mcp_tool(mcp_server)], "tool_choice": allowed})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice.tools[0]", r.text


def test_headers_reach_the_server(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("whoami", {}), say("ok"))
    tool = mcp_tool(mcp_server, headers={"Authorization": "Bearer s3cret", "X-Trace": "t1"})
    r = client.responses.create(model=MODEL, input="who", tools=[tool])  # type: ignore[list-item]
    assert r.output[1].output == "Bearer s3cret"  # type: ignore[union-attr]
    assert mcp_server.headers[-1]["x-trace"] == "t1"
    # `authorization` is sent as a bearer token
    engine.reset(function_call("whoami", {}), say("ok"))
    r = client.responses.create(model=MODEL, input="who", tools=[mcp_tool(mcp_server, authorization="tok")])  # type: ignore[list-item]
    assert r.output[1].output == "Bearer tok"  # type: ignore[union-attr]
    stored = client.responses.retrieve(r.id)
    assert stored.tools[0].authorization is None  # type: ignore[union-attr]


def test_approval_required_then_approved(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 20, "b": 22}))
    tool = mcp_tool(mcp_server, require_approval="always")
    first = checked(client.responses.create(model=MODEL, input="20+22?", tools=[tool]))  # type: ignore[list-item]
    assert first.status == "completed"
    listing, request = first.output
    assert (
        isinstance(request, McpApprovalRequest) and request.name == "add" and request.server_label == "calc"
    )
    assert json.loads(request.arguments) == {"a": 20, "b": 22}
    calls = mcp_server.count("tools/call")
    engine.reset(say("42."))
    second = checked(
        client.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
            tools=[tool],  # type: ignore[list-item]
        )
    )
    assert mcp_server.count("tools/call") == calls + 1
    call, message = second.output
    assert isinstance(call, McpCall) and call.approval_request_id == request.id and call.output == "42.0"
    assert second.output_text == "42."
    assert engine.requests[0].turns[-1] == ToolResult(call.id, "add", "42.0")
    # The history replays: the approval and the call, each once, as turns the model reads.
    engine.reset(say("Yes."))
    third = client.responses.create(model=MODEL, previous_response_id=second.id, input="sure?", tools=[tool])  # type: ignore[list-item]
    turns = engine.requests[0].turns
    assert ToolResult(call.id, "add", "42.0") in turns and sum(isinstance(t, ToolCall) for t in turns) == 1
    items = client.responses.input_items.list(second.id)
    assert [i.type for i in items.data] == ["mcp_approval_response"]
    for item in items.data:
        _no_extras(_ITEM.validate_python(item.model_dump(mode="json", exclude_unset=True)), item.type)
    assert third.status == "completed"


def test_approval_denied(client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 2}))
    tool = mcp_tool(mcp_server, require_approval={"always": {"tool_names": ["add"]}})
    first = client.responses.create(model=MODEL, input="1+2", tools=[tool])  # type: ignore[list-item]
    request = first.output[1]
    assert isinstance(request, McpApprovalRequest)
    calls = mcp_server.count("tools/call")
    engine.reset(say("Fine, I won't."))
    second = checked(
        client.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}],
            tools=[tool],  # type: ignore[list-item]
        )
    )
    assert mcp_server.count("tools/call") == calls and [i.type for i in second.output] == ["message"]
    call, result = engine.requests[0].turns[-2:]
    assert call == ToolCall(request.id, "add", request.arguments)
    assert isinstance(result, ToolResult) and "denied" in result.output


def test_require_approval_never_filter_runs_read_only_tools(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 2}), function_call("whoami", {}))
    tool = mcp_tool(mcp_server, require_approval={"never": {"read_only": True}})
    r = client.responses.create(model=MODEL, input="1+2", tools=[tool])  # type: ignore[list-item]
    assert [i.type for i in r.output] == ["mcp_list_tools", "mcp_call", "mcp_approval_request"]


def test_tool_choice_mcp_forces_the_tool(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 2}), say("3"))
    choice = {"type": "mcp", "server_label": "calc", "name": "add"}
    r = checked(
        client.responses.create(model=MODEL, input="1+2", tools=[mcp_tool(mcp_server)], tool_choice=choice)
    )  # type: ignore[arg-type, list-item]
    assert engine.requests[0].tool_choice == ForcedTool("add") and engine.requests[1].tool_choice == "auto"
    assert r.tool_choice.type == "mcp"  # type: ignore[union-attr]
    engine.reset(say("x"))
    client.responses.create(
        model=MODEL,
        input="1+2",
        tools=[mcp_tool(mcp_server)],
        tool_choice={"type": "mcp", "server_label": "calc"},
    )  # type: ignore[arg-type, list-item]
    assert engine.requests[0].tool_choice == "required" and len(engine.requests[0].tools) == 4


def test_mcp_items_in_a_conversation(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    conv = client.conversations.create()
    engine.reset(function_call("add", {"a": 1, "b": 1}), say("2"))
    client.responses.create(model=MODEL, input="1+1", conversation=conv.id, tools=[mcp_tool(mcp_server)])  # type: ignore[list-item]
    lists = mcp_server.count("tools/list")
    engine.reset(say("ok"))
    client.responses.create(model=MODEL, input="again", conversation=conv.id, tools=[mcp_tool(mcp_server)])  # type: ignore[list-item]
    assert mcp_server.count("tools/list") == lists
    items = client.conversations.items.list(conv.id)
    assert {"mcp_list_tools", "mcp_call"} <= {i.type for i in items.data}
    raw = httpx.get(f"{client.base_url}conversations/{conv.id}/items", timeout=10).json()["data"]
    for item in raw:
        _no_extras(_CONVERSATION_ITEM.validate_python(item), item["type"])
    assert (
        ToolResult(next(i.id for i in items.data if i.type == "mcp_call"), "add", "2.0")
        in engine.requests[0].turns
    )


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"server_url": "http://127.0.0.1:9/mcp"}, "tools[0].server_url"),
        ({"server_url": "file:///etc/passwd"}, "tools[0].server_url"),
        ({"server_url": None}, "tools[0].server_url"),
        ({"connector_id": "connector_gmail"}, "tools[0].connector_id"),
        ({"server_label": "9bad label"}, "tools[0].server_label"),
        ({"require_approval": "sometimes"}, "tools[0].require_approval"),
        ({"allowed_tools": "add"}, "tools[0].allowed_tools"),
        ({"headers": {"x": 1}}, "tools[0].headers.x"),
    ],
)
def test_bad_mcp_tools_are_a_400(
    live: LiveServer, mcp_server: McpTestServer, tool: dict[str, Any], param: str
) -> None:
    body = {k: v for k, v in {**mcp_tool(mcp_server), **tool}.items() if v is not None}
    r = post(live, {"input": "hi", "tools": [body]})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


def test_refused_choices_and_approvals(live: LiveServer, mcp_server: McpTestServer) -> None:
    tools = [mcp_tool(mcp_server), mcp_tool(mcp_server)]
    r = post(live, {"input": "hi", "tools": tools})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools[1].server_label"
    r = post(
        live,
        {"input": "hi", "tools": [mcp_tool(mcp_server)], "tool_choice": {"type": "mcp", "server_label": "x"}},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"
    answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_nope", "approve": True}
    r = post(live, {"input": [answer], "tools": [mcp_tool(mcp_server)]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0].approval_request_id"


def test_mcp_tools_are_refused_when_no_url_is_allowed(
    fake_server: LiveServer, mcp_server: McpTestServer
) -> None:
    r = httpx.post(
        fake_server.base_url + "/v1/responses",
        json={"model": MODEL, "input": "hi", "tools": [mcp_tool(mcp_server)]},
        timeout=30,
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools[0].server_url"
    assert "--mcp-allowed-urls" in r.json()["error"]["message"]


def test_every_output_item_validates(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 2}))
    tool = mcp_tool(mcp_server, require_approval={"always": {"tool_names": ["add"]}})
    r = client.responses.create(model=MODEL, input="1+2", tools=[tool])  # type: ignore[list-item]
    engine.reset(function_call("whoami", {}), say("3"))
    answer = {"type": "mcp_approval_response", "approval_request_id": r.output[1].id, "approve": False}
    r = client.responses.create(
        model=MODEL, previous_response_id=r.id, input=[answer], tools=[mcp_tool(mcp_server)]
    )  # type: ignore[list-item]
    raw = httpx.get(f"{client.base_url}responses/{r.id}", timeout=10).json()
    assert [i["type"] for i in raw["output"]] == ["mcp_call", "message"]
    validate_response(raw)
    for item in raw["output"]:
        _no_extras(_OUTPUT_ITEM.validate_python(item), item["type"])


def test_an_approval_request_streams(live: LiveServer, engine: FakeEngine, mcp_server: McpTestServer) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 2}))
    calls = mcp_server.count("tools/call")
    r = post(
        live, {"input": "1+2", "tools": [mcp_tool(mcp_server, require_approval="always")], "stream": True}
    )
    events = parse_sse(r.text)
    check_stream(events)
    assert event_runs(e["type"] for e in events)[-3:] == [
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    added, done = events[-3]["item"], events[-2]["item"]
    assert added["type"] == "mcp_approval_request" and added["arguments"] == ""
    assert validate_as(McpApprovalRequest, done).arguments == '{"a": 1, "b": 2}'
    assert events[-1]["response"]["status"] == "completed" and mcp_server.count("tools/call") == calls


def test_a_stateless_client_approves_by_resending_the_items(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 5, "b": 6}))
    tool = mcp_tool(mcp_server, require_approval="always")
    first = client.responses.create(model=MODEL, input="5+6", tools=[tool], store=False)  # type: ignore[list-item]
    request = first.output[1]
    assert isinstance(request, McpApprovalRequest)
    lists, calls = mcp_server.count("tools/list"), mcp_server.count("tools/call")
    engine.reset(say("11."))
    answer = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    resent = [
        {"role": "user", "content": "5+6"},
        *(i.model_dump(exclude_none=True) for i in first.output),
        answer,
    ]
    twice = [*resent, answer]  # the same approval given twice runs the call once
    second = checked(client.responses.create(model=MODEL, input=twice, tools=[tool], store=False))  # type: ignore[arg-type, list-item]
    assert [i.type for i in second.output] == ["mcp_call", "message"] and second.output[0].output == "11.0"  # type: ignore[union-attr]
    assert (mcp_server.count("tools/list"), mcp_server.count("tools/call")) == (lists, calls + 1)

"""openai-agents (Python), unchanged, with the hosted MCP tool (`HostedMCPTool`) and an approval callback, on the
real server (tiny model, outputs forced) and a real MCP server on 127.0.0.1.

The server lists the MCP server's tools and the model calls `add`; approval is required, so the first request
ends with an `mcp_approval_request`. The agent's callback approves it and the agent sends a second request
that resends every item with its `mcp_approval_response` (no `previous_response_id`): the server runs the call
there (the listing reused from the resent items, not listed again) and the model answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import openai
import pytest
from agents import Agent, HostedMCPTool, ModelSettings, Runner, set_tracing_disabled
from agents.items import MCPApprovalRequestItem, MCPApprovalResponseItem, MCPListToolsItem, ToolCallItem
from agents.tool import MCPToolApprovalFunctionResult, MCPToolApprovalRequest
from openai.types.responses.response_output_item import McpCall

from tests.clients.test_openai_agents import ForcedModel, tool_call
from tests.support.mcp_server import McpTestServer
from tests.support.real import TINY as MODEL

pytestmark = [pytest.mark.engine, pytest.mark.slow]


async def test_agent_with_hosted_mcp_tool_and_approval(
    base_url: str, mcp_server: McpTestServer, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    answer = "2 plus 3 is 5."
    model = ForcedModel(
        [[tool_call("add", {"a": 2, "b": 3})], [answer]],  # request 1: the call; request 2: the answer
        model=MODEL,
        openai_client=async_sdk(base_url, timeout=300),
    )
    asked: list[tuple[str, str, dict[str, object]]] = []

    def approve(request: MCPToolApprovalRequest) -> MCPToolApprovalFunctionResult:
        asked.append((request.data.server_label, request.data.name, json.loads(request.data.arguments)))
        return {"approve": True}

    tool = HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "calc",
            "server_url": mcp_server.url,
            "require_approval": "always",
        },
        on_approval_request=approve,
    )
    agent = Agent(name="calc", model=model, model_settings=ModelSettings(temperature=0), tools=[tool])
    listed, called = mcp_server.count("tools/list"), mcp_server.count("tools/call")

    streamed = Runner.run_streamed(agent, "What is 2 plus 3?")
    names = [e.name async for e in streamed.stream_events() if e.type == "run_item_stream_event"]
    assert streamed.final_output == answer
    assert asked == [("calc", "add", {"a": 2, "b": 3})]
    kinds = [type(i) for i in streamed.new_items]
    assert MCPListToolsItem in kinds and MCPApprovalRequestItem in kinds and MCPApprovalResponseItem in kinds
    calls = [i.raw_item for i in streamed.new_items if isinstance(i, ToolCallItem)]
    mcp_calls = [c for c in calls if isinstance(c, McpCall)]
    assert len(mcp_calls) == 1, calls
    call = mcp_calls[0]
    assert call.name == "add" and call.server_label == "calc" and call.status == "completed"
    assert call.output == "5.0" and call.error is None
    request = next(i.raw_item for i in streamed.new_items if isinstance(i, MCPApprovalRequestItem))
    assert call.approval_request_id == request.id
    assert "mcp_approval_requested" in names and "message_output_created" in names
    # One listing (the second request reused the resent one) and one call, on the real MCP server.
    assert mcp_server.count("tools/list") == listed + 1
    assert mcp_server.count("tools/call") == called + 1
    assert model.plan == [] and len(streamed.raw_responses) == 2

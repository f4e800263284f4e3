"""Remote MCP tools on vLLM (the tiny model, Hermes format) and a real MCP server: a `tool_choice` naming an MCP
tool makes the model call it, the server runs the call, and its output comes back in the response."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.responses.response_output_item import McpCall, McpListTools

from tests.support.mcp_server import McpTestServer
from tests.support.real import TINY, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response
from vllm_responses.config import Config

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(mcp_server: McpTestServer) -> Iterator[LiveServer]:
    s = tiny_model_server(workers=0, config=Config(mcp_allowed_urls=(mcp_server.url,), mcp_timeout=20))
    yield s
    s.stop()


def test_a_forced_mcp_call_runs_on_the_server(server: LiveServer, mcp_server: McpTestServer) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url, "require_approval": "never"}
    calls = mcp_server.count("tools/call")
    r = client.responses.create(
        model=TINY,
        input="What is 2 plus 3? Use the add tool.",
        tools=[tool],  # type: ignore[list-item]
        tool_choice={"type": "mcp", "server_label": "calc", "name": "add"},
        max_tool_calls=1,  # then the model answers in text
        max_output_tokens=200,
    )
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert r.status in ("completed", "incomplete")
    listing, call = r.output[0], r.output[1]
    assert isinstance(listing, McpListTools) and [t.name for t in listing.tools][0] == "add"
    assert isinstance(call, McpCall) and call.name == "add" and call.server_label == "calc"
    arguments = json.loads(call.arguments)  # the forced call follows the tool's input schema
    assert call.status == "completed" and call.error is None, call
    assert call.output == str(float(arguments["a"]) + float(arguments["b"]))
    assert mcp_server.count("tools/call") == calls + 1


def test_a_forced_mcp_call_streams(server: LiveServer, mcp_server: McpTestServer) -> None:
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url, "require_approval": "never"}
    body = {
        "model": TINY,
        "input": "Add 1 and 2.",
        "tools": [tool],
        "tool_choice": {"type": "mcp", "server_label": "calc", "name": "add"},
        "max_tool_calls": 1,
        "max_output_tokens": 100,
        "stream": True,
    }
    r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=300)
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    check_stream(events)
    types = [e["type"] for e in events]
    assert "response.mcp_call_arguments.delta" in types and "response.mcp_call.completed" in types

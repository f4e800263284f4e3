"""Remote MCP servers that speak the older HTTP+SSE transport (the `mcp` SDK's `sse_app`, on 127.0.0.1): the
server tries streamable HTTP, is refused with a 4xx, speaks SSE from then on; listing, calls, headers and tool
errors work as over streamable HTTP (tests/tools/test_mcp.py), and a streamable server is never asked over SSE."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.types.responses.response_output_item import McpCall, McpListTools

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.mcp_server import McpTestServer
from tests.support.mcp_server import mcp_sse_server as mcp_sse_server  # (fixture)
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config
from vllm_responses.tools import mcp_client

MODEL = "fake-model"


@pytest.fixture(scope="module")
def live(mcp_sse_server: McpTestServer, mcp_server: McpTestServer) -> Iterator[LiveServer]:
    config = Config(mcp_timeout=5.0, mcp_allowed_urls=(mcp_sse_server.url, mcp_server.url))
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


def tool(server: McpTestServer, **extra: object) -> dict[str, object]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": "never",
        **extra,
    }


def test_an_sse_server_is_listed_and_called(
    client: openai.OpenAI, engine: FakeEngine, mcp_sse_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 2, "b": 3}), say("It is 5."))
    r = client.responses.create(model=MODEL, input="2+3?", tools=[tool(mcp_sse_server)])  # type: ignore[list-item]
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    listing, call, _message = r.output
    assert isinstance(listing, McpListTools) and listing.error is None
    assert [t.name for t in listing.tools] == ["add", "fail", "slow", "whoami"]
    assert isinstance(call, McpCall) and call.output == "5.0" and call.error is None
    assert r.output_text == "It is 5."
    assert mcp_sse_server.url in mcp_client._SSE_ONLY  # found once, then spoken to over SSE at once
    assert {"tools/list", "tools/call"} <= set(mcp_sse_server.requests)


def test_headers_and_tool_errors_over_sse(
    client: openai.OpenAI, engine: FakeEngine, mcp_sse_server: McpTestServer
) -> None:
    engine.reset(function_call("whoami", {}), function_call("fail", {"reason": "bad"}), say("Done."))
    r = client.responses.create(
        model=MODEL,
        input="who?",
        tools=[tool(mcp_sse_server, headers={"Authorization": "Bearer sse-token"})],  # type: ignore[list-item]
    )
    calls = [item for item in r.output if isinstance(item, McpCall)]
    assert [c.name for c in calls] == ["whoami", "fail"]
    assert calls[0].output == "Bearer sse-token"
    assert calls[1].status == "failed" and calls[1].error.type == "mcp_tool_execution_error"  # type: ignore[union-attr]
    assert "Error executing tool fail" in calls[1].error.model_dump_json()  # type: ignore[union-attr]


def test_a_streamable_server_is_never_asked_over_sse(
    client: openai.OpenAI, engine: FakeEngine, mcp_server: McpTestServer
) -> None:
    engine.reset(function_call("add", {"a": 1, "b": 1}), say("2"))
    r = client.responses.create(model=MODEL, input="1+1?", tools=[tool(mcp_server)])  # type: ignore[list-item]
    assert r.output_text == "2" and mcp_server.url not in mcp_client._SSE_ONLY


def test_only_a_refused_initialize_means_sse() -> None:
    """An HTTP 4xx, or the JSON-RPC error the SDK's streamable client makes of one before any session
    (METHOD_NOT_FOUND for a 404, INTERNAL_ERROR for another non-2xx): worth trying SSE. Not a 401, a 500,
    a connection refused, a timeout."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    def status(code: int) -> httpx2.HTTPStatusError:
        request = httpx2.Request("POST", "http://x/mcp")
        return httpx2.HTTPStatusError("", request=request, response=httpx2.Response(code, request=request))

    assert all(mcp_client._refuses_streamable(status(code)) for code in (400, 404, 405))
    assert mcp_client._refuses_streamable(MCPError(-32603, "Server returned an error response"))
    assert mcp_client._refuses_streamable(ExceptionGroup("g", [MCPError(-32601, "Not Found")]))
    assert not mcp_client._refuses_streamable(status(401))  # a credentials problem, not a transport one
    assert not mcp_client._refuses_streamable(status(500))
    assert not mcp_client._refuses_streamable(MCPError(-32602, "Invalid params"))
    assert not mcp_client._refuses_streamable(ExceptionGroup("g", [ConnectionRefusedError()]))
    assert not mcp_client._refuses_streamable(TimeoutError())

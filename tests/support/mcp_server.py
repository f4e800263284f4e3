"""A real MCP server (the `mcp` SDK's `MCPServer`, streamable HTTP or HTTP+SSE) on 127.0.0.1 in a thread, for the MCP tests.

Its tools: `add` (sums two numbers, annotated read-only), `fail` (raises), `slow` (sleeps), `whoami` (answers
the `Authorization` header it got). `requests` records the JSON-RPC method of every request it received and
`headers` the headers of each, so a test can tell whether the tools were listed again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import pytest
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from tests.support.serving import free_port

__all__ = ["McpTestServer", "mcp_server", "mcp_sse_server"]


def _server() -> MCPServer:
    server = MCPServer("test-tools")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def fail(reason: str = "no reason") -> str:
        """Always fails."""
        raise RuntimeError(f"the tool failed: {reason}")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep for a while."""
        import anyio

        await anyio.sleep(seconds)
        return "slept"

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The Authorization header this call came with."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        return str(headers.get("authorization", "anonymous"))

    return server


class McpTestServer:
    """The test MCP server at `url`; `start()` / `stop()`. `transport`: streamable HTTP (at `/mcp`), or the
    older HTTP+SSE transport (at `/sse`, messages posted to `/messages/`) that many deployed servers speak."""

    def __init__(self, transport: Literal["streamable", "sse"] = "streamable") -> None:
        self.port = free_port()
        self.transport = transport
        self.requests: list[str] = []  # JSON-RPC methods, in order
        self.headers: list[dict[str, str]] = []
        app = _server().streamable_http_app() if transport == "streamable" else _server().sse_app()

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})

            async def tap() -> Any:
                message = await receive()
                if message["type"] == "http.request" and message.get("body"):
                    try:
                        body = json.loads(message["body"])
                    except ValueError:
                        body = None
                    if isinstance(body, dict) and "method" in body:
                        self.requests.append(str(body["method"]))
                return message

            await app(scope, tap, send)

        self.server = uvicorn.Server(
            uvicorn.Config(recording, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'mcp' if self.transport == 'streamable' else 'sse'}"

    def count(self, method: str) -> int:
        return self.requests.count(method)

    def start(self) -> McpTestServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="session")
def mcp_server() -> Iterator[McpTestServer]:
    """One MCP test server for the session (its tests compare request counts before and after, not totals)."""
    server = McpTestServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mcp_sse_server() -> Iterator[McpTestServer]:
    """The same tools over the HTTP+SSE transport."""
    server = McpTestServer("sse").start()
    yield server
    server.stop()

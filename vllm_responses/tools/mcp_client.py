"""The MCP SDK client, bounded by a timeout: list a remote server's tools, call one, and map every failure to an
error object of the OpenAI SDK's `McpToolCallError` shape (`McpFailure`); nothing above sees an MCP exception."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from vllm_responses.tools.net_guard import Pinned, Refused, UrlPolicy, pinned_transport

__all__ = ["CallOutcome", "McpFailure", "McpServer", "call_tool", "list_tools"]

logger = logging.getLogger(__name__)

# JSON-RPC codes the MCP spec uses for a closed connection and a request timeout (mcp_types.jsonrpc).
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001
_INTERNAL_ERROR = -32603
_METHOD_NOT_FOUND = -32601


@dataclass(frozen=True)
class McpServer:
    """Where one `mcp` tool's server is and how to reach it."""

    label: str
    url: str
    headers: Mapping[str, str]
    timeout_s: float
    policy: UrlPolicy = UrlPolicy()  # the operator's allow-list: checked again, and the address pinned, here


@dataclass(frozen=True)
class CallOutcome:
    """A call's result: its text `output`, or (the call failed) an `error` object for the `mcp_call` item."""

    output: str | None
    error: dict[str, Any] | None = None


class McpFailure(Exception):
    """Listing or calling failed: `error` is the `McpToolCallError` object (`mcp_protocol_error` / `http_error`)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups, which the SDK's task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _failure(exc: BaseException, server: McpServer, answered: bool) -> McpFailure:
    """Any exception from the SDK, its HTTP client or the URL guard as an `McpFailure` saying what went wrong.
    A refusal of the guard, a refused connection and a timeout before the server `answered` anything read
    the same (`unreachable`), so that no caller learns which addresses or ports are there."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    exc = _leaf(exc)
    if isinstance(exc, McpFailure):
        return exc
    if isinstance(exc, (Refused, httpx2.ConnectError, httpx2.ConnectTimeout)) or (
        isinstance(exc, (TimeoutError, OSError, httpx2.TransportError)) and not answered
    ):
        logger.warning("MCP server %r: could not connect: %r", server.label, exc)
        return unreachable(server)
    if isinstance(exc, (TimeoutError, httpx2.TimeoutException)):
        message = f"The MCP server {server.label!r} did not answer within {server.timeout_s:g} s."
        return McpFailure({"type": "mcp_protocol_error", "code": _REQUEST_TIMEOUT, "message": message})
    if isinstance(exc, httpx2.HTTPStatusError):
        code = exc.response.status_code
        message = f"The MCP server {server.label!r} answered HTTP {code}."
        return McpFailure({"type": "http_error", "code": code, "message": message})
    if isinstance(exc, MCPError):
        message = f"The MCP server {server.label!r} refused the request: {exc.message}"
        return McpFailure({"type": "mcp_protocol_error", "code": exc.code, "message": message})
    if isinstance(exc, (httpx2.HTTPError, OSError)):
        logger.warning("MCP server %r: the connection failed: %r", server.label, exc)
        message = f"The connection to the MCP server {server.label!r} failed."
        return McpFailure({"type": "mcp_protocol_error", "code": _CONNECTION_CLOSED, "message": message})
    logger.warning("MCP server %r: unexpected error %r", server.label, exc)
    message = f"The MCP server {server.label!r} failed: {type(exc).__name__}: {exc}"
    return McpFailure({"type": "mcp_protocol_error", "code": _INTERNAL_ERROR, "message": message})


def unreachable(server: McpServer) -> McpFailure:
    """The one failure of a server the guard refused or that could not be connected to."""
    message = f"Could not connect to the MCP server {server.label!r}."
    return McpFailure({"type": "mcp_protocol_error", "code": _CONNECTION_CLOSED, "message": message})


# Servers that refused the streamable HTTP transport and speak the older HTTP+SSE one (by URL, for this process).
_SSE_ONLY: set[str] = set()


def _refuses_streamable(exc: BaseException) -> bool:
    """Whether connecting over streamable HTTP failed as a server of the older HTTP+SSE transport refuses it:
    its initialize POST answered with a 4xx (the MCP spec's backwards-compatibility rule), which the SDK's
    streamable client reports as a JSON-RPC error before any session exists (`METHOD_NOT_FOUND` for a 404,
    `INTERNAL_ERROR` for another non-2xx such as SSE servers' 405)."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    leaf = _leaf(exc)
    if isinstance(leaf, httpx2.HTTPStatusError):
        return leaf.response.status_code in (400, 404, 405)
    return isinstance(leaf, MCPError) and leaf.code in (_METHOD_NOT_FOUND, _INTERNAL_ERROR)


class _Link:
    """One session's way to its server: the checked URL, its pinned transport, and whether the server has
    answered anything yet (a timeout before that is a failure to connect)."""

    def __init__(self, server: McpServer, pinned: Pinned) -> None:
        self.url = pinned.target.url
        self.pinned = pinned
        self.headers = dict(server.headers)
        self.answered = False

    def _answer(self) -> None:
        self.answered = True

    def client(self, headers: Any = None, timeout: Any = None, auth: Any = None) -> Any:
        """An httpx2 client over the pinned transport (the SDK's `httpx_client_factory` signature): no
        environment proxies, no redirects (the SDK follows those within the origin itself; the transport
        checks each request it makes)."""
        import httpx2
        from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            auth=auth,
            transport=pinned_transport(self.pinned, self._answer),
            trust_env=False,
            follow_redirects=False,
        )


@asynccontextmanager
async def _streamable(server: McpServer, link: _Link) -> AsyncIterator[Any]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with link.client(headers=link.headers) as http:
        transport = streamable_http_client(link.url, http_client=http)
        async with Client(transport, read_timeout_seconds=server.timeout_s, cache=None) as client:
            yield client


@asynccontextmanager
async def _sse(server: McpServer, link: _Link) -> AsyncIterator[Any]:
    from mcp import Client
    from mcp.client.sse import sse_client

    transport = sse_client(
        link.url,
        headers=link.headers,
        timeout=server.timeout_s,
        sse_read_timeout=server.timeout_s,
        httpx_client_factory=link.client,
    )
    async with Client(transport, read_timeout_seconds=server.timeout_s, cache=None) as client:
        yield client


async def _older_transport(stack: AsyncExitStack, server: McpServer, link: _Link, refused: Exception) -> Any:
    """A client over HTTP+SSE for a server that refused streamable HTTP (remembered when it answers); when it
    does not, the streamable refusal is the error."""
    logger.info("MCP server %r refused streamable HTTP: trying HTTP+SSE", server.label)
    try:
        client = await stack.enter_async_context(_sse(server, link))
    except Exception:
        raise refused from None
    _SSE_ONLY.add(link.url)
    return client


@asynccontextmanager
async def _session(server: McpServer) -> AsyncIterator[Any]:
    """A connected SDK `Client`; every failure inside, the timeout included, an `McpFailure`. The whole use
    (resolve, connect, request, close) is bounded by the server's timeout. The URL is checked against the
    operator's policy again and its host resolved once: every connection goes to that checked address
    (`net_guard`). The transport is chosen as the MCP spec tells a client that also serves older servers to
    choose it (and as the TypeScript SDK's clients do): streamable HTTP first; a server that refuses it with
    a 4xx is tried over HTTP+SSE, and one that answers there is spoken to over HTTP+SSE at once from then on."""
    link: _Link | None = None
    try:
        async with asyncio.timeout(server.timeout_s), AsyncExitStack() as stack:
            link = _Link(server, await server.policy.pin(server.url))
            if link.url in _SSE_ONLY:
                client = await stack.enter_async_context(_sse(server, link))
            else:
                try:
                    client = await stack.enter_async_context(_streamable(server, link))
                except Exception as refused:
                    if not _refuses_streamable(refused):
                        raise
                    client = await _older_transport(stack, server, link, refused)
            yield client
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the SDK's and httpx2's errors, in task groups: mapped in one place
        raise _failure(exc, server, link is not None and link.answered) from exc


async def list_tools(server: McpServer) -> list[dict[str, Any]]:
    """The server's tools (every page), each `{name, description, input_schema, annotations}`."""
    tools: list[dict[str, Any]] = []
    async with _session(server) as client:
        cursor: str | None = None
        for _page in range(100):  # a server whose pages never end cannot hang the response
            result = await client.list_tools(cursor=cursor)
            for tool in result.tools:
                annotations = (
                    tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if tool.annotations
                    else None
                )
                tools.append(
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.input_schema,
                        "annotations": annotations,
                    }
                )
            cursor = result.next_cursor
            if cursor is None:
                break
    return tools


async def call_tool(
    server: McpServer, name: str, arguments: dict[str, Any], listed: Mapping[str, Any] | None = None
) -> CallOutcome:
    """Run one tool. A tool's own error (an `isError` result) is an `mcp_tool_execution_error` outcome; the
    server unreachable, too slow or refusing the request, an `McpFailure`.

    `listed` is the tool as this response's listing (or an earlier one it reuses) gave it: the session is
    told of it first, so that it does not list the server's tools again before the call (the SDK lists a
    tool it has not seen, to check a structured result against an output schema; the listing we keep has no
    output schema, so none is checked)."""
    import mcp_types

    async with _session(server) as client:
        if listed is not None:
            known = mcp_types.Tool(
                name=name,
                input_schema=listed.get("input_schema") or {"type": "object"},
                description=listed.get("description"),
            )
            absorb = getattr(client.session, "_absorb_tool_listing", None)  # the SDK's own hook for this
            if absorb is not None:
                absorb(mcp_types.ListToolsResult(tools=[known]), complete=False)
        result = await client.call_tool(name, arguments)
    content = [part.model_dump(mode="json", by_alias=True, exclude_none=True) for part in result.content]
    if result.is_error:
        return CallOutcome(None, {"type": "mcp_tool_execution_error", "content": content})
    return CallOutcome(_result_text(content, result.structured_content))


def _result_text(content: list[dict[str, Any]], structured: Any) -> str:
    """A result's content as the text the model and the `mcp_call` item get: its text parts, other parts as
    JSON; the structured content when there is nothing else."""
    parts = [str(p["text"]) if p.get("type") == "text" else json.dumps(p) for p in content]
    if not parts and structured is not None:
        return json.dumps(structured)
    return "\n".join(parts)

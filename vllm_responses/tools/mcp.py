"""Remote MCP tools in a response: the request's checks, listing each server once, offering its tools to the
model, running the calls it makes (or asking the client's approval first), and the approved calls of a turn.

Per response, `McpPlan` is what the service resolves from the request and the conversation (which servers,
which listings to reuse, which approved calls to run); `McpRun` is its running state in the agent loop.
Every failure of a server (down, too slow, refusing, the tool's own error) is an output the model reads,
never a failed response.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.turns import mcp_result_text
from vllm_responses.engine.types import ForcedTool, ToolCall, ToolChoice, ToolResult, ToolSpec, Turn
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.items import McpListToolsTool
from vllm_responses.protocol.mcp_items import McpTool
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.tool_choice import ToolChoiceAllowed, ToolChoiceMcp
from vllm_responses.tools.mcp_client import McpFailure, McpServer, call_tool, list_tools
from vllm_responses.tools.net_guard import Refused, UrlPolicy, refused_headers

__all__ = ["McpPlan", "McpRoute", "McpRun", "UrlPolicy", "check_mcp_request", "mcp_plan"]

logger = logging.getLogger(__name__)

_INVALID_PARAMS = -32602  # JSON-RPC: the arguments the model wrote are not a JSON object
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name (RFC 9110 token)


def check_mcp_request(
    req: CreateResponseRequest,
    context: Sequence[Mapping[str, Any]],
    input_items: Sequence[Mapping[str, Any]],
    policy: UrlPolicy,
) -> None:
    """The request's `mcp` tools, `tool_choice` and `mcp_approval_response` inputs, checked: a 400 naming the
    param for what this server cannot or will not do."""
    labels: set[str] = set()
    for i, tool in enumerate(req.tools):
        if isinstance(tool, McpTool):
            _check_mcp_tool(i, tool, labels, policy)
            labels.add(tool.server_label)
    choice = req.tool_choice
    if isinstance(choice, ToolChoiceMcp) and choice.server_label not in labels:
        raise InvalidRequest(
            f"tool_choice names MCP server {choice.server_label!r}, which is not in tools.",
            param="tool_choice",
        )
    _check_approvals(context, input_items, labels)


def _check_mcp_tool(i: int, tool: McpTool, labels: Collection[str], policy: UrlPolicy) -> None:
    """`tools[i]`: no `connector_id` or `tunnel_id`, a `server_label` not in `labels` yet, an allowed http(s)
    `server_url`, and no `headers` that would change where or how the request goes."""
    for name in ("connector_id", "tunnel_id"):
        if getattr(tool, name) is not None:
            raise InvalidRequest(
                f"{name} is not supported: this server reaches remote MCP servers by server_url only.",
                param=f"tools[{i}].{name}",
                code="unsupported_parameter",
            )
    if tool.server_label in labels:
        raise InvalidRequest(
            f"Two mcp tools have the server_label {tool.server_label!r}; labels must be unique.",
            param=f"tools[{i}].server_label",
        )
    if not tool.server_url:
        raise InvalidRequest(
            "Missing required parameter: server_url.",
            param=f"tools[{i}].server_url",
            code="missing_required_parameter",
        )
    if tool.server_url.split(":", 1)[0].lower() not in ("http", "https"):
        raise InvalidRequest(
            f"Invalid server_url {tool.server_url!r}: an http or https URL is expected.",
            param=f"tools[{i}].server_url",
        )
    try:
        policy.match(tool.server_url)
    except Refused as exc:
        logger.info("MCP server URL %r refused: %s", tool.server_url, exc)
        raise InvalidRequest(
            f"The MCP server URL {tool.server_url!r} is not allowed on this server "
            "(the operator allows MCP servers with --mcp-allowed-urls).",
            param=f"tools[{i}].server_url",
            code="unsupported_value",
        ) from None
    _check_headers(i, tool)


def _check_headers(i: int, tool: McpTool) -> None:
    """`tools[i].headers`: no `Host` nor hop-by-hop header, names that are HTTP tokens and values on one line."""
    headers = tool.headers or {}
    refused = refused_headers(headers)
    if refused:
        raise InvalidRequest(
            f"The header {refused[0]!r} may not be set on a request to an MCP server.",
            param=f"tools[{i}].headers",
        )
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or any(c in str(value) for c in "\r\n\0"):
            raise InvalidRequest(
                f"The header {name!r} is not a valid HTTP header (a token name and a one-line value).",
                param=f"tools[{i}].headers",
            )


def _check_approvals(
    context: Sequence[Mapping[str, Any]], input_items: Sequence[Mapping[str, Any]], labels: Collection[str]
) -> None:
    """Each `mcp_approval_response` answers an `mcp_approval_request` of `context`; an approved one's server
    is among the request's tools (`labels`)."""
    requests = {it.get("id"): it for it in context if it.get("type") == "mcp_approval_request"}
    for i, item in enumerate(input_items):
        if item.get("type") != "mcp_approval_response":
            continue
        asked = requests.get(item.get("approval_request_id"))
        if asked is None:
            raise InvalidRequest(
                f"No mcp_approval_request found with id {item.get('approval_request_id')!r} (input[{i}]).",
                param=f"input[{i}].approval_request_id",
            )
        if item.get("approve") and asked.get("server_label") not in labels:
            raise InvalidRequest(
                f"The approved call is to MCP server {asked.get('server_label')!r}, which is not in tools.",
                param=f"input[{i}].approval_request_id",
            )


@dataclass(frozen=True)
class McpRoute:
    """Where a tool the model may call runs, and whether a call to it waits for approval."""

    server_label: str
    tool: Mapping[str, Any]  # as listed: name, description, input_schema, annotations
    approval: bool


@dataclass(frozen=True)
class Approved:
    """An approved `mcp_approval_request` whose call has not run yet."""

    request_id: str
    server_label: str
    name: str
    arguments: str


@dataclass(frozen=True)
class McpPlan:
    """The MCP part of a response: its servers (in `tools` order), the listings it reuses from the conversation
    (by label), the approved calls to run before the first model call, and a `tool_choice` naming MCP."""

    tools: tuple[McpTool, ...]
    servers: Mapping[str, McpServer]
    reused: Mapping[str, list[McpListToolsTool]]
    approved: tuple[Approved, ...] = ()
    choice: ToolChoiceMcp | None = None
    allowed: ToolChoiceAllowed | None = None  # `tool_choice: allowed_tools`: only the MCP tools it names


def mcp_plan(
    req: CreateResponseRequest,
    context: Sequence[Mapping[str, Any]],
    timeout_s: float,
    policy: UrlPolicy,
) -> McpPlan | None:
    """The request's `McpPlan` (None without mcp tools); `context` is the history and the input, as items;
    `policy` the operator's URL rule, which each connection applies again."""
    tools = tuple(req.mcp_tools)
    if not tools:
        return None
    servers = {
        t.server_label: McpServer(t.server_label, t.server_url or "", t.request_headers(), timeout_s, policy)
        for t in tools
    }
    reused: dict[str, list[McpListToolsTool]] = {}
    for item in context:  # the last good listing of each server wins
        if (
            item.get("type") == "mcp_list_tools"
            and item.get("server_label") in servers
            and not item.get("error")
        ):
            reused[str(item["server_label"])] = list(item.get("tools") or [])
    requests = {it.get("id"): it for it in context if it.get("type") == "mcp_approval_request"}
    ran = {it.get("approval_request_id") for it in context if it.get("type") == "mcp_call"}
    approved: list[Approved] = []
    for it in context:  # each approved request once, unless its call already ran
        asked = requests.get(it.get("approval_request_id"))
        if it.get("type") != "mcp_approval_response" or not it.get("approve") or asked is None:
            continue
        if asked["id"] in ran or any(a.request_id == asked["id"] for a in approved):
            continue
        approved.append(
            Approved(
                str(asked["id"]), str(asked["server_label"]), str(asked["name"]), str(asked["arguments"])
            )
        )
    choice = req.tool_choice if isinstance(req.tool_choice, ToolChoiceMcp) else None
    allowed = req.tool_choice if isinstance(req.tool_choice, ToolChoiceAllowed) else None
    return McpPlan(tools, servers, reused, tuple(approved), choice, allowed)


def _read_only(tool: Mapping[str, Any]) -> bool:
    annotations = tool.get("annotations") or {}
    return bool(annotations.get("readOnlyHint", annotations.get("read_only_hint", False)))


@dataclass
class McpRun:
    """One response's MCP state in the agent loop: the listings, the routes of the tools offered, the calls."""

    plan: McpPlan
    listings: dict[str, list[McpListToolsTool]] = field(default_factory=dict)
    routes: dict[str, McpRoute] = field(default_factory=dict)
    specs: list[ToolSpec] = field(default_factory=list)
    ready: bool = False  # listed and offered (`prepare` done)

    async def prepare(
        self, builder: ResponseBuilder, taken: Collection[str], turns: list[Turn]
    ) -> AsyncIterator[Event]:
        """Before the first model call: list each server not listed earlier in the conversation (an
        `mcp_list_tools` item each), work out the tools offered (names in `taken` are not), and run the calls
        the client approved (their results appended to `turns`)."""
        self.listings.update(self.plan.reused)
        for label, server in self.plan.servers.items():
            if label in self.listings:
                continue
            index, events = builder.mcp.list_start(label)
            for ev in events:
                yield ev
            error: str | None = None
            try:
                listed = [_listed(t) for t in await list_tools(server)]
            except McpFailure as exc:
                logger.warning("listing the tools of MCP server %r failed: %s", label, exc)
                listed, error = [], str(exc)
            if error is None:
                self.listings[label] = listed
            for ev in builder.mcp.list_done(index, listed, error):
                yield ev
        self._offer(set(taken))
        self.ready = True
        for call in self.plan.approved:
            index, events = builder.mcp.call_start(call.server_label, call.name, call.request_id)
            for ev in events + builder.mcp.call_delta(index, call.arguments):
                yield ev
            for ev in builder.mcp.call_arguments_done(index, call.arguments):
                yield ev
            async for ev in self.run(builder, index, turns):
                yield ev

    def _offer(self, taken: set[str]) -> None:
        """The tools offered to the model: each server's allowed ones (by its `allowed_tools`, and by a
        `tool_choice` of type `allowed_tools`), in `tools` order. A name already taken
        (a function, custom or code tool, or an earlier server's tool) is not offered again (logged)."""
        for tool in self.plan.tools:
            for listed in self.listings.get(tool.server_label, []):
                name = listed["name"]
                read_only = _read_only(listed)
                if not tool.allows(name, read_only):
                    continue
                if self.plan.allowed is not None and not self.plan.allowed.allows_mcp(
                    tool.server_label, name
                ):
                    continue
                if name in taken:
                    logger.warning(
                        "MCP tool %r of %r not offered: the name is taken", name, tool.server_label
                    )
                    continue
                taken.add(name)
                route = McpRoute(tool.server_label, listed, tool.needs_approval(name, read_only))
                self.routes[name] = route
                description = listed.get("description") or ""
                if tool.server_description:
                    description = (
                        f"{description}\n\n(MCP server {tool.server_label}: {tool.server_description})"
                    )
                schema = listed.get("input_schema") or {"type": "object", "properties": {}}
                self.specs.append(ToolSpec(name, description.strip(), dict(schema)))

    def first_choice(
        self, tools: Sequence[ToolSpec], choice: ToolChoice
    ) -> tuple[tuple[ToolSpec, ...], ToolChoice]:
        """The first model call's tools and `tool_choice` under a `tool_choice` naming an MCP server: its tool
        `name` forced, or (no name) one of that server's tools required (only those offered). A tool the
        server did not list cannot be forced: the choice falls back to `auto` (logged)."""
        forced = self.plan.choice
        if forced is None:
            return tuple(tools), choice
        mine = [
            t
            for t in tools
            if t.name in self.routes and self.routes[t.name].server_label == forced.server_label
        ]
        if forced.name is not None and any(t.name == forced.name for t in mine):
            return tuple(tools), ForcedTool(forced.name)
        if forced.name is None and mine:
            return tuple(mine), "required"
        logger.warning("tool_choice names an MCP tool that was not listed: %s", forced)
        return tuple(tools), "auto"

    async def run(self, builder: ResponseBuilder, index: int, turns: list[Turn]) -> AsyncIterator[Event]:
        """Run the `mcp_call` item at `index` (its arguments complete), finish it, and append the call and its
        result to `turns`."""
        item = builder.state.mcp_call(index)
        name, label = item["name"], item["server_label"]
        route = self.routes.get(name)
        output: str | None = None
        error: dict[str, Any] | None = None
        try:
            arguments = json.loads(item["arguments"] or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            message = f"The arguments of {name!r} are not a JSON object: {item['arguments']!r}"
            error = {"type": "mcp_protocol_error", "code": _INVALID_PARAMS, "message": message}
        else:
            try:
                outcome = await call_tool(
                    self.plan.servers[label], name, arguments, route.tool if route is not None else None
                )
                output, error = outcome.output, outcome.error
            except McpFailure as exc:
                logger.warning("MCP call %r on %r failed: %s", name, label, exc)
                error = exc.error
        for ev in builder.mcp.call_finished(index, output, error):
            yield ev
        turns.append(ToolCall(item["id"], name, item["arguments"] or "{}"))
        turns.append(ToolResult(item["id"], name, mcp_result_text(output, error)))


def _listed(tool: Mapping[str, Any]) -> McpListToolsTool:
    return {
        "name": str(tool["name"]),
        "input_schema": dict(tool.get("input_schema") or {}),
        "description": tool.get("description"),
        "annotations": tool.get("annotations"),
    }

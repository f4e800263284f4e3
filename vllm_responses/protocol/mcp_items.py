"""Pydantic models of remote MCP tools in a create body: the `mcp` tool and the four MCP input items."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field

from vllm_responses.protocol.lenient import LenientModel

__all__ = [
    "McpApprovalRequestInput",
    "McpApprovalResponseInput",
    "McpCallInput",
    "McpListToolsInput",
    "McpTool",
    "McpToolFilter",
]


class McpToolFilter(LenientModel):
    """`allowed_tools` / a `require_approval` entry as a filter: tool names, and/or read-only tools (those the
    server annotates `readOnlyHint`)."""

    tool_names: list[str] | None = None
    read_only: bool | None = None

    def matches(self, name: str, read_only: bool) -> bool:
        """Whether a tool is selected: every condition given holds (a filter with none selects nothing)."""
        if self.tool_names is None and self.read_only is None:
            return False
        if self.tool_names is not None and name not in self.tool_names:
            return False
        return self.read_only is None or self.read_only == read_only


class McpApprovalFilter(LenientModel):
    """`require_approval` per tool: the tools `never` selects run without approval; every other one (those
    `always` selects, and those neither selects) waits for it."""

    always: McpToolFilter | None = None
    never: McpToolFilter | None = None


class McpTool(LenientModel):
    """`{"type": "mcp", ...}`: the tools of a remote MCP server (the SDK's `tool.Mcp`)."""

    type: Literal["mcp"]
    server_label: str = Field(pattern=r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")
    server_url: str | None = None
    server_description: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    allowed_tools: Union[list[str], McpToolFilter, None] = None
    require_approval: Union[Literal["always", "never"], McpApprovalFilter, None] = None
    connector_id: str | None = None
    tunnel_id: str | None = None

    def allows(self, name: str, read_only: bool) -> bool:
        """Whether `allowed_tools` lets the model see this tool (absent: every tool)."""
        allowed = self.allowed_tools
        if allowed is None:
            return True
        if isinstance(allowed, list):
            return name in allowed
        if allowed.tool_names is None and allowed.read_only is None:
            return True
        return allowed.matches(name, read_only)

    def needs_approval(self, name: str, read_only: bool) -> bool:
        """Whether a call to this tool waits for the client's approval (absent: always, as OpenAI's default)."""
        rule = self.require_approval
        if rule is None or rule == "always":
            return True
        if rule == "never":
            return False
        if rule.never is not None and rule.never.matches(name, read_only):
            return False
        return True  # selected by `always`, or by neither: approval is the safe side

    def request_headers(self) -> dict[str, str]:
        """The HTTP headers sent to the server: `headers`, and `authorization` as a bearer token."""
        headers = dict(self.headers or {})
        if self.authorization:
            headers["Authorization"] = f"Bearer {self.authorization}"
        return headers


class McpListedTool(LenientModel):
    name: str
    input_schema: Any
    description: str | None = None
    annotations: Any = None


class McpListToolsInput(LenientModel):
    type: Literal["mcp_list_tools"]
    id: str
    server_label: str
    tools: list[McpListedTool]
    error: str | None = None


class McpCallInput(LenientModel):
    type: Literal["mcp_call"]
    id: str
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: Any = None
    approval_request_id: str | None = None
    status: Literal["in_progress", "completed", "incomplete", "calling", "failed"] | None = None


class McpApprovalRequestInput(LenientModel):
    type: Literal["mcp_approval_request"]
    id: str
    server_label: str
    name: str
    arguments: str


class McpApprovalResponseInput(LenientModel):
    type: Literal["mcp_approval_response"]
    approval_request_id: str
    approve: bool
    id: str | None = None
    reason: str | None = None

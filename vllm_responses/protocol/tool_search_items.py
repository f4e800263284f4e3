"""Pydantic models of tool search in a create body: the `tool_search` tool, and the items that load deferred tools
(`tool_search_call`, `tool_search_output`, `additional_tools`) sent back as input."""

from __future__ import annotations

from typing import Any, Literal

from vllm_responses.protocol.lenient import LenientModel

__all__ = ["AdditionalToolsInput", "ToolSearchCallInput", "ToolSearchOutputInput", "ToolSearchTool"]


class ToolSearchTool(LenientModel):
    """`tool_search`: the model searches the deferred tools (`defer_loading: true`); run by the server, or
    (`execution: "client"`) by the client, with the `description` and `parameters` it gives."""

    type: Literal["tool_search"]
    execution: Literal["server", "client"] | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSearchCallInput(LenientModel):
    type: Literal["tool_search_call"]
    arguments: Any = None
    id: str | None = None
    call_id: str | None = None
    execution: Literal["server", "client"] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None

    @property
    def key(self) -> str:
        return self.call_id or self.id or ""


class ToolSearchOutputInput(LenientModel):
    """The tools a search found (loaded from here on); `tools` holds tool definitions as `tools` does."""

    type: Literal["tool_search_output"]
    tools: list[dict[str, Any]]
    id: str | None = None
    call_id: str | None = None
    execution: Literal["server", "client"] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class AdditionalToolsInput(LenientModel):
    """Tools a developer makes available from this point of the conversation on."""

    type: Literal["additional_tools"]
    role: Literal["developer"] = "developer"
    tools: list[dict[str, Any]]
    id: str | None = None

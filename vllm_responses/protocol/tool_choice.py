"""The object forms of `tool_choice` in a create body, and the rule that `allowed_tools` names given tools."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Literal, Union

from pydantic import Field

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.lenient import LenientModel
from vllm_responses.protocol.web_search_options import WEB_SEARCH_TYPES

__all__ = [
    "ToolChoiceAllowed",
    "ToolChoiceBuiltin",
    "ToolChoiceCoding",
    "ToolChoiceCustom",
    "ToolChoiceFileSearch",
    "ToolChoiceFunction",
    "ToolChoiceMcp",
    "ToolChoiceObject",
    "ToolChoiceWebSearch",
    "check_allowed_tools",
]


class ToolChoiceFunction(LenientModel):
    type: Literal["function"]
    name: str


class ToolChoiceCustom(LenientModel):
    type: Literal["custom"]
    name: str


class ToolChoiceBuiltin(LenientModel):
    type: Literal["code_interpreter"]


class ToolChoiceWebSearch(LenientModel):
    """The web search must be called (the SDK's `ToolChoiceTypes` names the preview types; any type of the
    tool is taken)."""

    type: Literal[
        "web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"
    ]


class ToolChoiceFileSearch(LenientModel):
    """The file search must be called (the SDK's `ToolChoiceTypes`)."""

    type: Literal["file_search"]


class ToolChoiceCoding(LenientModel):
    """A coding tool must be called (the SDK's `ToolChoiceShell`, `ToolChoiceApplyPatch`)."""

    type: Literal["shell", "apply_patch"]


class ToolChoiceMcp(LenientModel):
    """A tool of a remote MCP server must be called: `name`, or (absent) any of the server's."""

    type: Literal["mcp"]
    server_label: str
    name: str | None = None


class ToolChoiceAllowed(LenientModel):
    """`allowed_tools`: only the listed tools may be called (`mode: required`: one of them must be)."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]]

    def allows(self, kind: str, name: str | None = None) -> bool:
        """Whether the tool of type `kind` (and, for function and custom tools, public name `name`) is among the
        allowed ones."""
        return any(t.get("type") == kind and (name is None or t.get("name") == name) for t in self.tools)

    def allows_web_search(self) -> bool:
        """Whether the web search (named by any of its types) is among the allowed tools."""
        return any(t.get("type") in WEB_SEARCH_TYPES for t in self.tools)

    def allows_mcp(self, server_label: str, name: str) -> bool:
        """Whether tool `name` of the MCP server `server_label` is among the allowed ones (an entry with no
        `name` allows every tool of its server)."""
        return any(
            t.get("type") == "mcp" and t.get("server_label") == server_label and t.get("name") in (None, name)
            for t in self.tools
        )


# The object forms, told apart by `type` (an unknown one is a 400 naming `tool_choice.type`).
ToolChoiceObject = Annotated[
    Union[
        ToolChoiceFunction,
        ToolChoiceCustom,
        ToolChoiceBuiltin,
        ToolChoiceWebSearch,
        ToolChoiceFileSearch,
        ToolChoiceCoding,
        ToolChoiceMcp,
        ToolChoiceAllowed,
    ],
    Field(discriminator="type"),
]


def check_allowed_tools(
    choice: ToolChoiceAllowed,
    functions: Collection[str],
    has_code_tool: bool,
    customs: Collection[str] = (),
    mcp_labels: Collection[str] = (),
    coding: Collection[str] = (),
    has_web_search: bool = False,
    has_file_search: bool = False,
) -> None:
    """Each `tool_choice.tools[i]` must name a function or custom tool of `tools`, the code interpreter given
    there, an MCP server of `tools` (`{"type": "mcp", "server_label": ..., "name": ...}`, `name` optional), a
    coding tool given there (`coding`: their types), a web search given there (by any of its types), or the
    file search given there:
    an `InvalidRequest` naming `tool_choice.tools[i]` otherwise (and `tool_choice.tools` when empty)."""
    if not choice.tools:
        raise InvalidRequest("tool_choice.tools must name at least one tool.", param="tool_choice.tools")
    for i, entry in enumerate(choice.tools):
        kind = entry.get("type")
        if kind == "function" and entry.get("name") in functions:
            continue
        if kind == "code_interpreter" and has_code_tool:
            continue
        if kind == "custom" and entry.get("name") in customs:
            continue
        if kind == "mcp" and entry.get("server_label") in mcp_labels:
            continue
        if kind in coding or (kind in WEB_SEARCH_TYPES and has_web_search):
            continue
        if kind == "file_search" and has_file_search:
            continue
        what = f"{kind} {entry.get('name')!r}" if kind in ("function", "custom") else f"a {kind!r} tool"
        if kind == "mcp":
            what = f"MCP server {entry.get('server_label')!r}"
        raise InvalidRequest(
            f"tool_choice.tools[{i}] names {what}, which is not in tools.", param=f"tool_choice.tools[{i}]"
        )

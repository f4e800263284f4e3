"""The tools a request offers the model: function and custom tools (the ones the client answers) beside the code
interpreter; a custom tool offered as a function taking one string, its grammar checked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from vllm_responses.context.searches import tool_description
from vllm_responses.engine.call_tags import grammar_format
from vllm_responses.engine.types import CUSTOM_INPUT_KEY, ToolSpec, code_tool_spec
from vllm_responses.protocol.coding_items import ApplyPatchTool, LocalShellTool, ShellTool
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import (
    CustomTool,
    FunctionTool,
    NamespaceTool,
    model_tool_name,
    public_tool_name,
)
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.tool_choice import ToolChoiceAllowed
from vllm_responses.tools.shell_patch import coding_tool_spec

__all__ = [
    "CUSTOM_PARAMETERS",
    "check_grammar",
    "client_tool_spec",
    "custom_tool_spec",
    "custom_tools",
    "function_tool_spec",
    "offered_tools",
]

# The arguments a custom tool is offered with (as vLLM's own server offers one: `custom_tool_parameters`).
CUSTOM_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        CUSTOM_INPUT_KEY: {"type": "string", "description": "The free-form text input of this tool."}
    },
    "required": [CUSTOM_INPUT_KEY],
    "additionalProperties": False,
}


def offered_tools(req: CreateResponseRequest, loaded: Sequence[Any] = ()) -> list[ToolSpec]:
    """The tools the model is offered for `req` before any MCP server's are listed: the code interpreter, then
    the function, custom and coding tools in `tools` order, a namespace's in its place (each grammar checked: a
    400 naming the tool), only those an `allowed_tools` tool_choice allows. With a `tool_search` tool, those
    given `defer_loading: true` are left out, and the tools `loaded` by the context (`tool_search_output`,
    `additional_tools`: their request models) are offered after the others."""
    searching = any(t.type == "tool_search" for t in req.tools)
    tools: list[ToolSpec] = [code_tool_spec()] if req.code_tool is not None else []
    for i, tool in enumerate([*req.tools, *loaded]):
        param = f"tools[{i}]" if i < len(req.tools) else "input"
        deferred = searching and i < len(req.tools)  # (a loaded tool's definition may still say so)
        if isinstance(tool, (FunctionTool, CustomTool)) and not (deferred and tool.defer_loading):
            tools.append(client_tool_spec(tool, param))
        elif isinstance(tool, NamespaceTool):
            for j, inner in enumerate(tool.tools):
                if not (deferred and inner.defer_loading):
                    tools.append(client_tool_spec(inner, f"{param}.tools[{j}]", tool))
        elif isinstance(tool, (ShellTool, LocalShellTool, ApplyPatchTool)):
            tools.append(coding_tool_spec(tool))
    tools = list({t.name: t for t in reversed(tools)}.values())[::-1]  # a loaded tool given again: once
    if isinstance(req.tool_choice, ToolChoiceAllowed):
        allowed = req.tool_choice
        tools = [t for t in tools if allowed.allows(*_choice_key(t))]
    return tools


def custom_tools(req: CreateResponseRequest, loaded: Sequence[Any] = ()) -> list[tuple[str, CustomTool]]:
    """Every custom tool of `req` and of the tools `loaded` by its context, deferred or namespaced ones too,
    with the parameter that names it (`tools[i]`, `tools[i].tools[j]`, `input`), as `offered_tools` names it."""
    found: list[tuple[str, CustomTool]] = []
    for i, tool in enumerate([*req.tools, *loaded]):
        param = f"tools[{i}]" if i < len(req.tools) else "input"
        if isinstance(tool, CustomTool):
            found.append((param, tool))
        elif isinstance(tool, NamespaceTool):
            found += [
                (f"{param}.tools[{j}]", t) for j, t in enumerate(tool.tools) if isinstance(t, CustomTool)
            ]
    return found


def _choice_key(spec: ToolSpec) -> tuple[str, str | None]:
    """How a `tool_choice` names the tool offered as `spec`: its type, and (function and custom tools) its
    public name, `namespace.name` for a namespaced one."""
    if spec.code_interpreter:
        return "code_interpreter", None
    if spec.call_type is not None:
        return spec.name, None  # shell, local_shell, apply_patch
    return ("custom" if spec.custom else "function"), public_tool_name(spec.item_name, spec.namespace)


def client_tool_spec(
    tool: FunctionTool | CustomTool, param: str, namespace: NamespaceTool | None = None
) -> ToolSpec:
    """A function or custom tool as the model is offered it; in a namespace, under `{namespace}__{name}` with
    the namespace's description before its own."""
    if isinstance(tool, CustomTool):
        check_grammar(tool, param)
        spec = custom_tool_spec(tool)
    else:
        spec = function_tool_spec(tool)
    if namespace is None:
        return spec
    return replace(
        spec,
        name=model_tool_name(tool.name, namespace.name),
        description=tool_description(tool, namespace),
        namespace=namespace.name,
    )


def function_tool_spec(tool: FunctionTool) -> ToolSpec:
    """A function tool as the model is offered it (no parameters: an object with none)."""
    return ToolSpec(
        tool.name,
        tool_description(tool),
        tool.parameters or {"type": "object", "properties": {}},
        strict=bool(tool.strict),
    )


def custom_tool_spec(tool: CustomTool) -> ToolSpec:
    """The tool as the model is offered it: its description (the grammar noted), and the grammar its input must
    match."""
    grammar = tool.grammar
    return ToolSpec(
        tool.name,
        tool_description(tool),
        CUSTOM_PARAMETERS,
        custom=True,
        grammar=(grammar.syntax, grammar.definition) if grammar is not None else None,
    )


def check_grammar(tool: CustomTool, param: str) -> None:
    """A custom tool's grammar must parse: an `InvalidRequest` naming `{param}.format.definition` otherwise."""
    grammar = tool.grammar
    if grammar is None:
        return
    try:
        grammar_format(grammar.syntax, grammar.definition)
    except ValueError as exc:
        raise InvalidRequest(
            f"The {grammar.syntax} definition of custom tool {tool.name!r} does not parse: {exc}",
            param=f"{param}.format.definition",
            code="invalid_value",
        ) from None

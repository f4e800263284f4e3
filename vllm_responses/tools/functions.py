"""Custom tools: offered to the model as a function taking one string, their grammar checked and made an xgrammar format."""

from __future__ import annotations

from typing import Any

from vllm_responses.engine.call_tags import grammar_format
from vllm_responses.engine.types import CUSTOM_INPUT_KEY, ToolSpec
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import CustomTool

__all__ = ["CUSTOM_PARAMETERS", "check_grammar", "custom_tool_spec"]

# The arguments a custom tool is offered with (as vLLM's own server offers one: `custom_tool_parameters`).
CUSTOM_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        CUSTOM_INPUT_KEY: {"type": "string", "description": "The free-form text input of this tool."}
    },
    "required": [CUSTOM_INPUT_KEY],
    "additionalProperties": False,
}


def custom_tool_spec(tool: CustomTool) -> ToolSpec:
    """The tool as the model is offered it: its description, and the grammar its input must match."""
    description = tool.description or ""
    grammar = tool.grammar
    if grammar is not None:
        kind = "regular expression" if grammar.syntax == "regex" else "Lark grammar"
        note = f"Its input must match this {kind}:\n{grammar.definition}"
        description = f"{description}\n\n{note}" if description else note
    return ToolSpec(
        tool.name,
        description,
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

"""xgrammar structural tags for Hermes-format calls: one tag per tool (its arguments' JSON schema, or a custom
tool's grammar), forced (`tags_with_separator`) or, for strict and grammar tools, after a free-text trigger."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vllm_responses.chat import CUSTOM_INPUT_KEY, ToolSpec
from vllm_responses.custom_tools import grammar_format
from vllm_responses.engine.base import EngineRejected

__all__ = ["TRIGGER", "constrains_free_calls", "forced_calls_tag", "free_calls_tag"]

TRIGGER = "<tool_call>"
# How a Hermes call opens and closes: the template's own spacing, and the compact one (as vLLM's tags allow).
_SPACINGS = (("<tool_call>\n", "\n</tool_call>"), ("<tool_call>", "</tool_call>"))
ANY_OBJECT: dict[str, Any] = {"type": "object"}


def constrains_free_calls(tools: Sequence[ToolSpec]) -> bool:
    """Whether a free (`tool_choice: auto`) call to one of `tools` is constrained: a strict function or a
    custom tool with a grammar is offered."""
    return any(t.strict or t.grammar is not None for t in tools)


def _tags(
    tool: ToolSpec, spacings: Sequence[tuple[str, str]], *, schema_for_all: bool
) -> list[dict[str, Any]]:
    """The tags of calls to `tool`: a grammar tool's input inside `{"input": "..."}` matches its grammar;
    otherwise the arguments match the tool's schema (a non-strict function's, only with `schema_for_all`;
    else any JSON object)."""
    head = f'{{"name": {json.dumps(tool.name)}, "arguments": '
    if tool.grammar is not None:
        try:
            content = grammar_format(*tool.grammar)
        except ValueError as exc:
            raise EngineRejected(
                f"the grammar of custom tool {tool.name!r} does not parse: {exc}", code="invalid_value"
            ) from exc
        head += f'{{"{CUSTOM_INPUT_KEY}": "'
        tail = '"}}'
    else:
        own = schema_for_all or tool.strict or tool.custom or tool.code_interpreter
        schema = (tool.parameters or ANY_OBJECT) if own else ANY_OBJECT
        content = {"type": "json_schema", "json_schema": schema}
        tail = "}"
    return [
        {"type": "tag", "begin": begin + head, "content": content, "end": tail + end}
        for begin, end in spacings
    ]


def _structural_tag(fmt: dict[str, Any]) -> dict[str, Any]:
    return {"structural_tag": json.dumps({"type": "structural_tag", "format": fmt})}


def forced_calls_tag(tools: Sequence[ToolSpec], *, parallel: bool = False) -> dict[str, Any]:
    """A structural tag forcing well-formed Hermes calls to `tools` and nothing else: exactly one call, or
    with `parallel` one or more separated by newlines; each call's arguments match its tool's schema."""
    tags = [tag for tool in tools for tag in _tags(tool, _SPACINGS[:1], schema_for_all=True)]
    fmt = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": "\n",
        "at_least_one": True,
        "stop_after_first": not parallel,
    }
    return _structural_tag(fmt)


def free_calls_tag(tools: Sequence[ToolSpec], *, parallel: bool = True) -> dict[str, Any]:
    """A structural tag leaving text free until `<tool_call>`, then holding the call to one of `tools`:
    a strict function's arguments to its schema, a custom tool's input to its grammar, any other call's
    arguments to a JSON object; free text again after the call (none more with `parallel` off)."""
    tags = [tag for tool in tools for tag in _tags(tool, _SPACINGS, schema_for_all=False)]
    fmt = {"type": "triggered_tags", "triggers": [TRIGGER], "tags": tags, "stop_after_first": not parallel}
    return _structural_tag(fmt)

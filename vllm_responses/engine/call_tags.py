"""xgrammar structural tags for tool calls in any format with a `CallShape`: one tag per tool (its arguments'
JSON schema, or a custom tool's grammar), forced (`tags_with_separator`) or, for strict and grammar tools, after
a free-text trigger (or, for formats whose calls open the output, as the alternative to free text); and, where the
final answer must be JSON (`text.format`), calls or that JSON and nothing else."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any

from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.call_shapes import HERMES, CallShape
from vllm_responses.engine.pythonic_grammar import ANY_KWARGS, kwargs_grammar
from vllm_responses.engine.types import CUSTOM_INPUT_KEY, ToolSpec

__all__ = [
    "ANY_OBJECT",
    "calls_or_json_tag",
    "constrains_free_calls",
    "forced_calls_tag",
    "free_calls_tag",
    "grammar_format",
]

ANY_OBJECT: dict[str, Any] = {"type": "object"}
_ANY_TEXT: dict[str, Any] = {"type": "any_text"}


def constrains_free_calls(tools: Sequence[ToolSpec]) -> bool:
    """Whether a free (`tool_choice: auto`) call to one of `tools` is constrained: a strict function or a
    custom tool with a grammar is offered."""
    return any(t.strict or t.grammar is not None for t in tools)


# Grammars converted lately, kept so that a request's grammar checked off the event loop (tools/grammars.py) is
# not converted again on it when its tools are offered and at each model call (128 of at most
# --max-grammar-bytes each).
GRAMMAR_CACHE_SIZE = 128


def grammar_format(syntax: str, definition: str) -> dict[str, Any]:
    """The xgrammar structural-tag format matching `definition` (a Lark grammar becomes xgrammar's EBNF, the
    one grammar syntax a structural tag takes); a `ValueError` saying why when it does not parse. Each is
    converted once while it is among the `GRAMMAR_CACHE_SIZE` latest."""
    ok, text = _converted(syntax, definition)
    if not ok:
        raise ValueError(text)
    if syntax == "regex":
        return {"type": "regex", "pattern": definition}
    return {"type": "grammar", "grammar": text}


@functools.lru_cache(maxsize=GRAMMAR_CACHE_SIZE)
def _converted(syntax: str, definition: str) -> tuple[bool, str]:
    """(True, the EBNF of a Lark grammar; "" for a regex) or (False, why it does not parse)."""
    import xgrammar  # vLLM's structured-output backend; imported on first use (it takes seconds)

    try:
        if syntax == "regex":
            xgrammar.Grammar.from_regex(definition)
            return True, ""
        return True, str(xgrammar.Grammar.from_lark(definition))
    except RuntimeError as exc:  # xgrammar's parse errors: "[time] file.cc:83: Regex parsing error at ..."
        first = (str(exc).strip().splitlines() or ["it does not parse"])[0]
        return False, re.sub(r"^\[[^\]]*\] \S+: ", "", first)


def _grammar(tool: ToolSpec) -> dict[str, Any]:
    assert tool.grammar is not None
    try:
        return grammar_format(*tool.grammar)
    except ValueError as exc:
        raise EngineRejected(
            f"the grammar of custom tool {tool.name!r} does not parse: {exc}", code="invalid_value"
        ) from exc


def _arguments(tool: ToolSpec, shape: CallShape, *, schema_for_all: bool) -> tuple[str, dict[str, Any], str]:
    """(text before, format, text after) of the arguments of a call to `tool`: a grammar tool's input inside
    `{"input": "..."}` (pythonic: `input="..."`) matches its grammar; otherwise the arguments match the tool's
    schema (a non-strict function's, only with `schema_for_all`; else any JSON object / any literal keyword
    arguments)."""
    if tool.grammar is not None:
        if shape.arguments == "pythonic":
            return f'{CUSTOM_INPUT_KEY}="', _grammar(tool), '"'
        return f'{{"{CUSTOM_INPUT_KEY}": "', _grammar(tool), '"}'
    own = schema_for_all or tool.strict or tool.custom or tool.code_interpreter
    if shape.arguments == "pythonic":
        kwargs = kwargs_grammar(tool.parameters) if own else ANY_KWARGS
        return "", {"type": "grammar", "grammar": kwargs}, ""
    schema = (tool.parameters or ANY_OBJECT) if own else ANY_OBJECT
    return "", {"type": "json_schema", "json_schema": schema}, ""


def _tags(tool: ToolSpec, shape: CallShape, *, forced: bool) -> list[dict[str, Any]]:
    """The tags of calls to `tool` in `shape`'s format (forced: only its first spelling)."""
    tags = []
    for opening, closings in shape.openings(tool, forced=forced):
        if shape.code_opening is not None and opening == shape.code_opening:
            before, content, after = "", _ANY_TEXT, ""
        else:
            before, content, after = _arguments(tool, shape, schema_for_all=forced)
        ends = [after + c for c in closings]
        tags.append(
            {
                "type": "tag",
                "begin": opening + before,
                "content": content,
                "end": ends[0] if len(ends) == 1 else ends,
            }
        )
    return tags


def _structural_tag(fmt: dict[str, Any]) -> dict[str, Any]:
    return {"structural_tag": json.dumps({"type": "structural_tag", "format": fmt})}


def _calls(tools: Sequence[ToolSpec], shape: CallShape, *, parallel: bool, forced: bool) -> dict[str, Any]:
    """One call (several with `parallel` where the format allows) to `tools` and nothing else."""
    tags = [tag for tool in tools for tag in _tags(tool, shape, forced=forced)]
    calls: dict[str, Any] = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": shape.separator,
        "at_least_one": True,
        "stop_after_first": not (parallel and shape.several),
    }
    opening, closing = shape.wrap
    if opening or closing:
        calls = {"type": "sequence", "elements": [_const(opening), calls, _const(closing)]}
    return calls


def _const(text: str) -> dict[str, Any]:
    return {"type": "const_string", "value": text}


def forced_calls_tag(
    tools: Sequence[ToolSpec], *, parallel: bool = False, shape: CallShape = HERMES
) -> dict[str, Any]:
    """A structural tag forcing well-formed calls to `tools` in `shape`'s format and nothing else (no text, no
    reasoning before them): exactly one call, or with `parallel` one or more; each call's arguments match its
    tool's schema."""
    return _structural_tag(_calls(tools, shape, parallel=parallel, forced=True))


def free_calls_tag(
    tools: Sequence[ToolSpec], *, parallel: bool = True, shape: CallShape = HERMES
) -> dict[str, Any]:
    """A structural tag leaving text free and holding calls to `tools`: a custom tool's input to its grammar,
    the arguments of a strict function, a custom tool without a grammar and the code interpreter to their
    schema, any other function's to a JSON object; with `parallel` off, nothing follows the first call.
    Where calls open at a trigger, text is free until it and again after the call; where they open the
    output, the output is either the calls or text that cannot be read as one."""
    if shape.triggers:
        tags = [tag for tool in tools for tag in _tags(tool, shape, forced=False)]
        fmt = {
            "type": "triggered_tags",
            "triggers": list(shape.triggers),
            "tags": tags,
            "stop_after_first": not (parallel and shape.several),
        }
        return _structural_tag(fmt)
    text = {"type": "any_text", "excludes": list(shape.text_excludes)}
    banned = "".join("\\" + c for c in shape.text_first_not)
    first = {"type": "regex", "pattern": f"[^\\s{banned}]"}
    fmt = {
        "type": "or",
        "elements": [
            _calls(tools, shape, parallel=parallel, forced=False),
            {"type": "sequence", "elements": [first, text]},
        ],
    }
    return _structural_tag(fmt)


def calls_or_json_tag(
    tools: Sequence[ToolSpec], schema: dict[str, Any], *, parallel: bool = True, shape: CallShape = HERMES
) -> dict[str, Any]:
    """A structural tag for a model call that may call `tools` or answer, where the answer must be JSON
    matching `schema` (`text.format`): the output is either calls in `shape`'s format, held as free calls are
    (`free_calls_tag`; with `parallel` off, one), or the JSON (after `shape.answer_opening`), nothing else: no
    text beside the calls, no text around the JSON."""
    answer: dict[str, Any] = {"type": "json_schema", "json_schema": schema}
    if shape.answer_opening:
        answer = {"type": "sequence", "elements": [_const(shape.answer_opening), answer]}
    fmt = {"type": "or", "elements": [_calls(tools, shape, parallel=parallel, forced=False), answer]}
    return _structural_tag(fmt)

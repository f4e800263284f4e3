"""Unit tests: the structural tags of Hermes calls to strict functions and custom tools, free and forced, as
xgrammar reads them (which outputs they accept and refuse)."""

from __future__ import annotations

import json

import pytest

from tests.support.grammars import accepts, request
from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.call_tags import free_calls_tag
from vllm_responses.engine.sampling import structured_constraint
from vllm_responses.engine.types import ForcedTool, ToolSpec, code_tool_spec
from vllm_responses.tools.functions import CUSTOM_PARAMETERS

xgr = pytest.importorskip("xgrammar")

STRICT = ToolSpec(
    "add",
    "",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    },
    strict=True,
)
LOOSE = ToolSpec(
    "note", "", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)
SQL = ToolSpec(
    "sql", "", CUSTOM_PARAMETERS, custom=True, grammar=("lark", 'start: "SELECT " NAME\nNAME: /[a-z]+/')
)
DIGITS = ToolSpec("digits", "", CUSTOM_PARAMETERS, custom=True, grammar=("regex", "[0-9]{3}"))
FREE_TEXT = ToolSpec("echo", "", CUSTOM_PARAMETERS, custom=True)


def call(name: str, arguments: str, *, compact: bool = False) -> str:
    body = f'{{"name": "{name}", "arguments": {arguments}}}'
    return f"<tool_call>{body}</tool_call>" if compact else f"<tool_call>\n{body}\n</tool_call>"


def test_free_calls_are_constrained_only_with_a_strict_or_grammar_tool() -> None:
    assert structured_constraint(request(LOOSE, FREE_TEXT, code_tool_spec()), "hermes") is None
    for tool in (STRICT, SQL, DIGITS):
        c = structured_constraint(request(LOOSE, tool), "hermes")
        assert c is not None and json.loads(c["structural_tag"])["format"]["type"] == "triggered_tags"
    # Not for formats with no call shape (markdown: only code blocks), nor with tool_choice "none".
    assert structured_constraint(request(STRICT), "markdown_code") is None
    assert structured_constraint(request(STRICT), "none") is None
    assert structured_constraint(request(STRICT, tool_choice="none"), "hermes") is None


def test_free_text_then_a_strict_call_that_follows_the_schema() -> None:
    c = structured_constraint(request(STRICT, LOOSE), "hermes")
    assert accepts(c, "Just an answer, no call.")
    assert accepts(c, "Let me add. " + call("add", '{"a": 3}') + " Done.")
    assert accepts(c, call("add", '{"a": 3}', compact=True))
    assert not accepts(c, call("add", '{"a": "three"}'))  # strict: the schema holds
    assert not accepts(c, call("add", '{"a": 3, "b": 4}'))
    assert accepts(c, call("note", '{"other": 1}'))  # not strict: any JSON object
    assert not accepts(c, call("note", "[1]"))
    assert not accepts(c, call("unknown", "{}"))  # only the tools offered


def test_parallel_off_allows_one_free_call() -> None:
    c = free_calls_tag((STRICT,), parallel=False)
    assert accepts(c, "x " + call("add", '{"a": 1}'))
    assert not accepts(c, call("add", '{"a": 1}') + call("add", '{"a": 2}'))


def test_custom_tool_input_follows_its_grammar_free_and_forced() -> None:
    free = structured_constraint(request(SQL, DIGITS), "hermes")
    assert accepts(free, "Querying. " + call("sql", '{"input": "SELECT abc"}'))
    assert not accepts(free, call("sql", '{"input": "DROP abc"}'))
    assert accepts(free, call("digits", '{"input": "123"}'))
    assert not accepts(free, call("digits", '{"input": "12a"}'))
    forced = structured_constraint(request(SQL, DIGITS, tool_choice=ForcedTool("sql")), "hermes")
    assert accepts(forced, call("sql", '{"input": "SELECT abc"}'))
    assert not accepts(forced, "text first " + call("sql", '{"input": "SELECT abc"}'))
    assert not accepts(forced, call("digits", '{"input": "123"}'))  # the named tool only
    required = structured_constraint(request(SQL, FREE_TEXT, tool_choice="required"), "hermes")
    assert accepts(required, call("echo", '{"input": "any text"}'))
    assert not accepts(required, call("echo", '{"text": "x"}'))


def test_a_grammar_that_does_not_parse_is_refused() -> None:
    bad = ToolSpec("bad", "", CUSTOM_PARAMETERS, custom=True, grammar=("regex", "[0-9"))
    with pytest.raises(EngineRejected, match="does not parse"):
        structured_constraint(request(bad), "hermes")

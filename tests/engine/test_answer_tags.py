"""Unit tests: `text.format` beside tools, as xgrammar reads the structural tags (calls or the schema's JSON,
nothing else, in every format with a call shape), and the answers as our parsers read them back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.parsers.helpers import run, summarize
from tests.engine.test_call_grammars import ADD, DIGITS, JSON_FORMATS, NOTE
from tests.support.grammars import accepts, request
from vllm_responses.engine.call_shapes import SHAPES
from vllm_responses.engine.sampling import answer_beside_tools, structured_constraint
from vllm_responses.engine.types import ForcedTool, Sampling, code_tool_spec

xgr = pytest.importorskip("xgrammar")

ANSWER = {
    "type": "object",
    "properties": {"color": {"enum": ["red", "green"]}, "ok": {"type": "boolean"}},
    "required": ["color", "ok"],
    "additionalProperties": False,
}
SCHEMA_FORMAT = {"type": "json_schema", "name": "answer", "schema": ANSWER, "strict": True}
GOOD = '{"color": "red", "ok": true}'
# How each format writes one call to `add`, and how it opens its final answer.
CALLS = {fmt: write("add", '{"a": 1}') for fmt, (write, _sep) in JSON_FORMATS.items()} | {
    "pythonic": "[add(a=1)]"
}
OPENING = {"harmony": "<|channel|>final<|message|>"}


def held(*tools: Any, fmt: dict[str, Any] = SCHEMA_FORMAT, parser: str = "hermes", **kw: Any) -> Any:
    return structured_constraint(request(*tools, sampling=Sampling(text_format=fmt), **kw), parser)


def test_every_format_with_a_shape_is_covered() -> None:
    from vllm_responses.engine.parsers import get_parser

    assert {get_parser(name).name for name in SHAPES} == set(CALLS)


@pytest.mark.parametrize("fmt", sorted(CALLS))
def test_a_call_or_the_schemas_json_and_nothing_else(fmt: str) -> None:
    c = held(ADD, NOTE, parser=fmt)
    answer = OPENING.get(fmt, "") + GOOD
    assert accepts(c, CALLS[fmt])  # a call, held as a free call is (a strict function's schema)
    assert accepts(c, answer)  # or the JSON
    assert not accepts(c, OPENING.get(fmt, "") + '{"color": "blue", "ok": true}')  # not the schema's
    assert not accepts(c, OPENING.get(fmt, "") + '{"color": "red"}')  # a required key missing
    assert not accepts(c, "Just an answer.")  # no free text
    assert not accepts(c, "Sure. " + CALLS[fmt])  # no text before a call
    assert not accepts(c, answer + " Done.")  # nor after the JSON
    assert not accepts(c, CALLS[fmt].replace("a=1", 'a="x"').replace('{"a": 1}', '{"a": "x"}'))
    r = summarize(run(fmt, [answer]))
    assert (json.loads(r.text), r.calls) == (json.loads(GOOD), [])  # the parser reads the answer as text


def test_parallel_calls_as_the_format_allows() -> None:
    two = CALLS["hermes"] * 2
    assert accepts(held(ADD), two)
    assert not accepts(held(ADD, parallel_tool_calls=False), two)


def test_custom_tools_keep_their_grammar_and_other_functions_take_any_object() -> None:
    c = held(DIGITS, NOTE)
    write = JSON_FORMATS["hermes"][0]
    assert accepts(c, write("digits", '{"input": "123"}'))
    assert not accepts(c, write("digits", '{"input": "12a"}'))
    assert accepts(c, write("note", '{"anything": [1]}'))
    assert not accepts(c, write("unknown", "{}"))
    assert accepts(c, GOOD)


def test_json_object_asks_for_any_object() -> None:
    c = held(ADD, fmt={"type": "json_object"})
    assert accepts(c, '{"x": [1, 2]}') and accepts(c, CALLS["hermes"])
    assert not accepts(c, "[1]") and not accepts(c, "text")


def test_forced_calls_win_and_none_is_the_schema_alone() -> None:
    for choice in ("required", ForcedTool("add")):
        c = held(ADD, tool_choice=choice)
        assert accepts(c, CALLS["hermes"]) and not accepts(c, GOOD)
    assert held(ADD, tool_choice="none") == {"json": ANSWER}
    assert held(fmt=SCHEMA_FORMAT) == {"json": ANSWER}  # no tools offered


def test_the_structured_extension_wins() -> None:
    req = request(ADD, sampling=Sampling(text_format=SCHEMA_FORMAT, structured={"regex": "x"}))
    assert structured_constraint(req, "hermes") == {"regex": "x"}
    assert not answer_beside_tools(req)
    assert answer_beside_tools(request(ADD, sampling=Sampling(text_format=SCHEMA_FORMAT)))
    assert not answer_beside_tools(request(ADD, sampling=Sampling(text_format={"type": "text"})))


def test_the_fallback_holds_hermes_calls_or_the_json() -> None:
    c = held(ADD, parser="auto")
    assert accepts(c, CALLS["hermes"]) and accepts(c, GOOD) and not accepts(c, "free text")
    assert summarize(run("auto", [CALLS["hermes"]])).calls == [("add", {"a": 1})]


def test_formats_with_no_call_shape_hold_the_answer_alone() -> None:
    code = code_tool_spec()
    for parser in ("markdown_code", "llama3_python_tag", "none"):
        assert held(code, ADD, parser=parser) == {"json": ANSWER}
    # A call the engine opens with the code prefill writes the code: a later call is held.
    req = request(code, sampling=Sampling(text_format=SCHEMA_FORMAT))
    assert structured_constraint(req, "markdown_code", prefilled=True) is None

"""Unit tests: the grammar of pythonic keyword arguments held to a JSON schema, as xgrammar reads it, and the
literals it allows as `ast.literal_eval` reads them back."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from vllm_responses.engine.pythonic_grammar import ANY_KWARGS, kwargs_grammar, py_literal

xgr = pytest.importorskip("xgrammar")

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"},
        "scale": {"type": ["number", "null"]},
        "tags": {"type": "array", "items": {"type": "boolean"}},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
    },
    "required": ["city", "days"],
}


def accepts(grammar: str, text: str) -> bool:
    from xgrammar.testing import _is_grammar_accept_string

    return bool(_is_grammar_accept_string(xgr.Grammar.from_ebnf(grammar), text))


@pytest.mark.parametrize(
    "text",
    [
        'city="Paris", days=2',
        'city="P\\u00e9", unit="c", days=-1, scale=None',
        'city="x", days=0, scale=1.5e3, tags=[True, False], where={"lat": 1, "lon": -2.5}',
    ],
)
def test_arguments_that_follow_the_schema(text: str) -> None:
    assert accepts(kwargs_grammar(SCHEMA), text)
    tree = ast.parse(f"f({text})", mode="eval").body
    assert isinstance(tree, ast.Call)
    [ast.literal_eval(k.value) for k in tree.keywords]  # the values are Python literals


@pytest.mark.parametrize(
    "text",
    [
        'days=2, city="Paris"',  # schema order
        'city="Paris"',  # `days` is required
        'city="Paris", days="2"',
        'city="Paris", days=2, unit="k"',
        'city="Paris", days=2, extra=1',
        'city="Paris", days=2, where={"lat": 1}',
        'city="a\\/b", days=2',  # not a Python escape
        "city='Paris', days=2",  # strings are double-quoted
    ],
)
def test_arguments_that_do_not(text: str) -> None:
    assert not accepts(kwargs_grammar(SCHEMA), text)


def test_without_properties_any_literal_keyword_arguments() -> None:
    for schema in (None, {"type": "object"}, {"type": "object", "properties": {}}):
        assert kwargs_grammar(schema) == ANY_KWARGS
    assert accepts(ANY_KWARGS, 'a=[1, {"k": None}], b="x"') and accepts(ANY_KWARGS, "")
    assert not accepts(ANY_KWARGS, "a=x")


@pytest.mark.parametrize("value", ["é\n\"'", 3, -2.5, True, None, [1, "a"], {"k": [False]}])
def test_py_literal_round_trips(value: Any) -> None:
    assert ast.literal_eval(py_literal(value)) == value

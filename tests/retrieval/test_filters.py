"""Attribute filters and attributes: every operator, nesting, type mismatches, missing keys, and the 400s that name
the path at fault; a file's attributes bounded as OpenAI's."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.shared import ComparisonFilter, CompoundFilter

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.retrieval.attributes import check_attributes
from vllm_responses.retrieval.filters import MAX_DEPTH, Comparison, Compound, matches, parse_filter

DOC = {"author": "ada", "year": 2021, "score": 4.5, "draft": False, "date": "2024-03-01"}


def passes(spec: dict[str, Any], attributes: dict[str, Any] = DOC) -> bool:
    if spec["type"] in ("and", "or"):
        CompoundFilter.model_validate(spec)  # the SDK's shape
    else:
        ComparisonFilter.model_validate(spec)
    return matches(parse_filter(spec), attributes)


@pytest.mark.parametrize(
    ("op", "key", "value", "expected"),
    [
        ("eq", "author", "ada", True),
        ("eq", "author", "bob", False),
        ("eq", "year", 2021, True),
        ("eq", "year", 2021.0, True),
        ("eq", "year", "2021", False),  # a string never equals a number
        ("ne", "author", "bob", True),
        ("ne", "author", "ada", False),
        ("ne", "year", "2021", True),
        ("gt", "year", 2020, True),
        ("gt", "year", 2021, False),
        ("gte", "year", 2021, True),
        ("gte", "year", 2022, False),
        ("lt", "year", 2022, True),
        ("lt", "year", 2021, False),
        ("lte", "year", 2021, True),
        ("lte", "year", 2020, False),
        ("in", "year", ["bob", 2021], True),
        ("in", "year", ["bob", "2021"], False),
        ("in", "author", ["bob", "ada"], True),
        ("nin", "author", ["bob", "eve"], True),
        ("nin", "year", [2021], False),
    ],
)
def test_each_operator(op: str, key: str, value: Any, expected: bool) -> None:
    assert passes({"type": op, "key": key, "value": value}) is expected


def test_booleans_floats_and_strings() -> None:
    assert passes({"type": "eq", "key": "draft", "value": False})
    assert not passes({"type": "eq", "key": "draft", "value": 0})  # a boolean is not a number
    assert not passes({"type": "eq", "key": "year", "value": True})
    assert passes({"type": "gt", "key": "score", "value": 4})
    assert passes({"type": "lte", "key": "score", "value": 4.5})
    assert passes({"type": "gte", "key": "date", "value": "2024-01-01"})  # strings by code point: ISO dates
    assert not passes({"type": "lt", "key": "date", "value": "2024-03-01"})
    assert not passes({"type": "gt", "key": "author", "value": 3})  # a string against a number: no match
    assert not passes({"type": "lt", "key": "draft", "value": 1})  # a boolean has no order


def test_a_missing_attribute_satisfies_only_ne_and_nin() -> None:
    for op, value, expected in [
        ("eq", "x", False),
        ("ne", "x", True),
        ("gt", 1, False),
        ("lte", 1, False),
        ("in", ["x"], False),
        ("nin", ["x"], True),
    ]:
        assert passes({"type": op, "key": "missing", "value": value}) is expected, op


def test_compound_filters_nest() -> None:
    recent = {"type": "gte", "key": "year", "value": 2020}
    by_bob = {"type": "eq", "key": "author", "value": "bob"}
    draft = {"type": "eq", "key": "draft", "value": True}
    assert passes(
        {
            "type": "and",
            "filters": [
                recent,
                {"type": "or", "filters": [by_bob, {"type": "ne", "key": "draft", "value": True}]},
            ],
        }
    )
    assert not passes({"type": "and", "filters": [recent, by_bob]})
    assert passes({"type": "or", "filters": [by_bob, recent]})
    assert not passes({"type": "or", "filters": [by_bob, draft]})
    parsed = parse_filter({"type": "or", "filters": [by_bob, {"type": "and", "filters": [recent]}]})
    assert parsed == Compound(
        "or", (Comparison("author", "eq", "bob"), Compound("and", (Comparison("year", "gte", 2020),)))
    )


def nested(depth: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "eq", "key": "a", "value": 1}
    for _ in range(depth):
        spec = {"type": "and", "filters": [spec]}
    return spec


@pytest.mark.parametrize(
    ("spec", "param", "code"),
    [
        ("author = ada", "filters", "invalid_type"),
        ({"key": "a", "value": 1}, "filters.type", "invalid_value"),
        ({"type": "like", "key": "a", "value": 1}, "filters.type", "invalid_value"),
        ({"type": "eq", "value": 1}, "filters.key", "invalid_value"),
        ({"type": "eq", "key": "", "value": 1}, "filters.key", "invalid_value"),
        ({"type": "eq", "key": "a"}, "filters.value", "missing_required_parameter"),
        ({"type": "eq", "key": "a", "value": None}, "filters.value", "invalid_type"),
        ({"type": "eq", "key": "a", "value": {"x": 1}}, "filters.value", "invalid_type"),
        ({"type": "eq", "key": "a", "value": ["x"]}, "filters.value", "invalid_type"),
        ({"type": "gt", "key": "a", "value": True}, "filters.value", "invalid_type"),
        ({"type": "in", "key": "a", "value": "x"}, "filters.value", "invalid_value"),
        ({"type": "in", "key": "a", "value": []}, "filters.value", "invalid_value"),
        ({"type": "nin", "key": "a", "value": ["x", True]}, "filters.value[1]", "invalid_type"),
        ({"type": "and", "filters": []}, "filters.filters", "invalid_value"),
        ({"type": "or"}, "filters.filters", "invalid_value"),
        (
            {"type": "and", "filters": [{"type": "eq", "key": "a", "value": 1}, {"type": "eq", "value": 1}]},
            "filters.filters[1].key",
            "invalid_value",
        ),
        (
            {
                "type": "or",
                "filters": [{"type": "and", "filters": [{"type": "in", "key": "a", "value": [1, None]}]}],
            },
            "filters.filters[0].filters[0].value[1]",
            "invalid_type",
        ),
        (nested(MAX_DEPTH + 1), "filters" + ".filters[0]" * MAX_DEPTH, "invalid_value"),
    ],
)
def test_bad_filters_name_the_path(spec: object, param: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_filter(spec)
    assert (err.value.param, err.value.code, err.value.status) == (param, code, 400), err.value.message


def test_the_deepest_allowed_nesting_parses() -> None:
    assert matches(parse_filter(nested(MAX_DEPTH)), {"a": 1})


def test_attributes_bounds() -> None:
    good = {"author": "ada", "year": 2021, "score": 0.5, "draft": True}
    assert check_attributes(good) == good and check_attributes(None) == {}
    assert check_attributes({f"k{i}": i for i in range(16)})
    assert check_attributes({"s": "x" * 512}) == {"s": "x" * 512}
    bad: list[tuple[object, str, str]] = [
        ([1], "attributes", "invalid_type"),
        ({f"k{i}": i for i in range(17)}, "attributes", "object_above_max_properties"),
        ({"k" * 65: 1}, "attributes", "invalid_value"),
        ({"s": "x" * 513}, "attributes.s", "string_above_max_length"),
        ({"n": None}, "attributes.n", "invalid_type"),
        ({"n": [1]}, "attributes.n", "invalid_type"),
        ({"n": float("nan")}, "attributes.n", "invalid_value"),
    ]
    for value, param, code in bad:
        with pytest.raises(InvalidRequest) as err:
            check_attributes(value)
        assert (err.value.param, err.value.code) == (param, code), value

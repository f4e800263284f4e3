"""Attribute filters as the SDK types them (`ComparisonFilter`, `CompoundFilter` nested): `parse_filter` checks
one (a 400 naming the path at fault, e.g. `filters.filters[1].key`), `matches` applies it to a file's attributes.

How a comparison reads an attribute: `eq` / `ne` compare values of the same JSON type (a number never equals a
string or a boolean); `gt` / `gte` / `lt` / `lte` compare numbers with numbers and strings with strings (by code
point, so ISO dates order as dates); `in` / `nin` test membership in a list of strings and numbers. An attribute
that is missing, or of another type than the comparison needs, satisfies only `ne` and `nin`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.retrieval.attributes import AttributeValue

__all__ = ["Comparison", "Compound", "Filter", "matches", "parse_filter"]

Operator = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
_OPERATORS: tuple[str, ...] = get_args(Operator)
_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
MAX_DEPTH = 8  # compound filters inside compound filters
MAX_NODES = 256  # comparisons and compounds in one filter
MAX_LIST = 256  # values of one `in` / `nin`


@dataclass(frozen=True)
class Comparison:
    key: str
    type: Operator
    value: AttributeValue | tuple[str | float, ...]


@dataclass(frozen=True)
class Compound:
    type: Literal["and", "or"]
    filters: tuple[Filter, ...]


Filter = Comparison | Compound


def parse_filter(value: object, param: str = "filters") -> Filter:
    """`value` checked as a filter; a 400 naming the deepest path at fault."""
    budget = [MAX_NODES]
    return _parse(value, param, 0, budget)


def _parse(value: object, param: str, depth: int, budget: list[int]) -> Filter:
    budget[0] -= 1
    if budget[0] < 0:
        raise InvalidRequest(f"Invalid '{param}': a filter holds at most {MAX_NODES} filters.", param=param)
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    kind = value.get("type")
    if kind in ("and", "or"):
        return _compound(value, kind, param, depth, budget)
    if kind not in _OPERATORS:
        supported = ", ".join(repr(op) for op in (*_OPERATORS, "and", "or"))
        shown = "missing" if kind is None else repr(kind)
        raise InvalidRequest(
            f"Invalid value for '{param}.type': {shown}. Supported values are: {supported}.",
            param=f"{param}.type",
        )
    return _comparison(value, kind, param)


def _compound(
    value: Mapping[str, object], kind: Literal["and", "or"], param: str, depth: int, budget: list[int]
) -> Compound:
    if depth >= MAX_DEPTH:
        raise InvalidRequest(f"Invalid '{param}': filters nest at most {MAX_DEPTH} deep.", param=param)
    items = value.get("filters")
    if not isinstance(items, list) or not items:
        raise InvalidRequest(
            f"Invalid value for '{param}.filters': expected a non-empty array of filters.",
            param=f"{param}.filters",
        )
    return Compound(
        kind, tuple(_parse(item, f"{param}.filters[{i}]", depth + 1, budget) for i, item in enumerate(items))
    )


def _comparison(value: Mapping[str, object], kind: Operator, param: str) -> Comparison:
    key = value.get("key")
    if not isinstance(key, str) or not key:
        raise InvalidRequest(
            f"Invalid value for '{param}.key': expected a non-empty string.", param=f"{param}.key"
        )
    if "value" not in value:
        raise InvalidRequest(
            f"Missing required parameter: '{param}.value'.",
            param=f"{param}.value",
            code="missing_required_parameter",
        )
    return Comparison(key, kind, _operand(value["value"], kind, f"{param}.value"))


def _operand(value: object, kind: Operator, param: str) -> AttributeValue | tuple[str | float, ...]:
    """The comparison's value, of a type its operator can use."""
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not value or len(value) > MAX_LIST:
            raise InvalidRequest(
                f"Invalid value for '{param}': '{kind}' takes a non-empty array of at most {MAX_LIST} strings or "
                "numbers.",
                param=param,
            )
        for i, item in enumerate(value):
            if not _is_number(item) and not isinstance(item, str):
                raise InvalidRequest(
                    f"Invalid type for '{param}[{i}]': expected a string or a number.",
                    param=f"{param}[{i}]",
                    code="invalid_type",
                )
        return tuple(value)
    if isinstance(value, list):
        raise InvalidRequest(
            f"Invalid type for '{param}': '{kind}' takes a string, a number or a boolean (an array goes with 'in' "
            "or 'nin').",
            param=param,
            code="invalid_type",
        )
    if kind in _ORDER and not (_is_number(value) or isinstance(value, str)):
        raise InvalidRequest(
            f"Invalid type for '{param}': '{kind}' takes a number or a string.",
            param=param,
            code="invalid_type",
        )
    if not (isinstance(value, (str, bool)) or _is_number(value)):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected a string, a number or a boolean.",
            param=param,
            code="invalid_type",
        )
    return value  # type: ignore[return-value]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_type(a: object, b: object) -> bool:
    """Both booleans, both numbers or both strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))


def matches(filter_: Filter, attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a file with these attributes passes the filter."""
    if isinstance(filter_, Compound):
        results = (matches(f, attributes) for f in filter_.filters)
        return all(results) if filter_.type == "and" else any(results)
    return _compare(filter_, attributes.get(filter_.key))


def _compare(c: Comparison, attribute: AttributeValue | None) -> bool:
    if c.type in ("in", "nin"):
        assert isinstance(c.value, tuple)
        inside = attribute is not None and any(_same_type(attribute, v) and attribute == v for v in c.value)
        return inside if c.type == "in" else not inside
    equal = attribute is not None and _same_type(attribute, c.value) and attribute == c.value
    if c.type in ("eq", "ne"):
        return equal if c.type == "eq" else not equal
    if attribute is None or not _same_type(attribute, c.value) or isinstance(attribute, bool):
        return False
    return bool(_ORDER[c.type](attribute, c.value))

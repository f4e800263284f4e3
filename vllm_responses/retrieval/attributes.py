"""A file's `attributes` as OpenAI bounds them: at most 16 keys of at most 64 characters, each value a string of
at most 512 characters, a number or a boolean; `check_attributes` refuses the rest with a 400."""

from __future__ import annotations

import math
from collections.abc import Mapping

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.vector_stores import parse_text

__all__ = ["MAX_KEYS", "MAX_KEY_CHARS", "MAX_VALUE_CHARS", "AttributeValue", "Attributes", "check_attributes"]

AttributeValue = str | float | bool
Attributes = dict[str, AttributeValue]

MAX_KEYS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512


def check_attributes(value: object, param: str = "attributes") -> Attributes:
    """`value` checked as a file's attributes (absent or null: none); a 400 naming the key at fault."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    if len(value) > MAX_KEYS:
        raise InvalidRequest(
            f"Invalid '{param}': an object with at most {MAX_KEYS} keys was expected, but got {len(value)}.",
            param=param,
            code="object_above_max_properties",
        )
    out: Attributes = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise InvalidRequest(
                f"Invalid '{param}': each key is a string of 1 to {MAX_KEY_CHARS} characters.", param=param
            )
        out[key] = _value(item, f"{param}.{key}")
    return out


def _value(item: object, param: str) -> AttributeValue:
    if isinstance(item, bool):
        return item
    if isinstance(item, (int, float)):
        if not math.isfinite(item):
            raise InvalidRequest(f"Invalid value for '{param}': a finite number is expected.", param=param)
        return item
    if isinstance(item, str):
        parse_text(item, param, MAX_VALUE_CHARS)  # a 400 past the bound
        return item
    raise InvalidRequest(
        f"Invalid type for '{param}': expected a string, a number or a boolean.",
        param=param,
        code="invalid_type",
    )

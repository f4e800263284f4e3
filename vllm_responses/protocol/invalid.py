"""A pydantic `ValidationError` as the 400 OpenAI answers: the most specific error, its `param` path
(`input[0].content[1].type`) and a message naming the value and what is supported."""

from __future__ import annotations

import functools
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from vllm_responses.protocol.errors import InvalidRequest

__all__ = ["invalid_request", "param_path"]

_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")


@functools.cache
def _labels() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """Names of this package's pydantic models (the labels pydantic gives a plain union's branches), their
    `type` tags (the labels of a tagged union's branches) and their field names."""
    names: set[str] = set()
    tags: set[str] = set()
    fields: set[str] = set()
    todo: list[type[BaseModel]] = [BaseModel]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("vllm_responses."):
                names.add(sub.__name__)
                fields.update(sub.model_fields)
                kind = sub.model_fields.get("type")
                if kind is not None and get_origin(kind.annotation) is Literal:
                    tags.update(str(t) for t in get_args(kind.annotation))
    return frozenset(names), frozenset(tags), frozenset(fields)


def param_path(error: Any) -> str:
    """A pydantic error's location as an OpenAI `param`, without the labels pydantic adds for union branches
    and containers; a tagged union's missing or unknown tag is named by its field (`...content[0].type`)."""
    out = ""
    skip_tag = after_index = False  # the next label may name the branch of a tagged union
    models, tags, fields = _labels()
    after_field = False  # a tagged union in a field of its own (`tools[0].format`): its tag follows the field
    for part in error["loc"]:
        if isinstance(part, int):
            out += f"[{part}]"
            after_index, after_field = True, False
            continue
        if (
            skip_tag
            or (after_index and part in tags)
            or (after_field and part in tags and part not in fields)
        ):
            skip_tag = after_index = after_field = False
            continue
        after_index = after_field = False
        if "[" in part:  # `tagged-union[...]`, `list[...]`, `literal[...]`: labels, not fields
            skip_tag = part.startswith("tagged-union[")
            continue
        if part in ("str", "int", "float", "bool", "list", "dict") or part in models:
            continue
        out += f".{part}" if out else part
        after_field = True
    if error["type"] in _TAG_ERRORS:
        field = str(error.get("ctx", {}).get("discriminator", "'type'")).strip("'")
        out += f".{field}" if out else field
    return out or "body"


def _specificity(error: Any) -> tuple[int, int]:
    """How specific an error is: the depth of its param, then whether the value's JSON type fitted the
    branch that refused it (a tag or value error, rather than the wrong kind of value)."""
    param = param_path(error)
    fitted = not str(error["type"]).endswith("_type")
    return param.count(".") + param.count("["), int(fitted)


def invalid_request(exc: ValidationError) -> InvalidRequest:
    """The 400 for a failed validation: its most specific error (of a union, the branch that got furthest)."""
    error = max(exc.errors(), key=_specificity)
    param = param_path(error)
    kind = error["type"]
    ctx = error.get("ctx", {})
    if kind in ("missing", "union_tag_not_found"):
        return InvalidRequest(
            f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter"
        )
    if kind == "union_tag_invalid":
        detail = f"{_shown(ctx.get('tag'))}. Supported values are: {ctx.get('expected_tags')}."
    elif kind == "literal_error" and isinstance(error.get("input"), (str, int, float, bool)):
        detail = f"{_shown(error['input'])}. Supported values are: {ctx.get('expected')}."
    elif kind in _BOUNDS and isinstance(error.get("input"), (int, float)):
        return _out_of_range(param, kind, error["input"], ctx)
    elif kind.endswith("_type"):  # the wrong JSON type: "Input should be a valid integer"
        # (for a model outside a tagged union, "... or instance of SummaryText": its class name is in the 400)
        message = str(error["msg"]).replace("Input should be", "expected")
        return InvalidRequest(f"Invalid type for '{param}': {message}.", param=param, code="invalid_type")
    else:
        detail = str(error["msg"]).removeprefix("Value error, ") + "."
    return InvalidRequest(f"Invalid value for '{param}': {detail}", param=param, code="invalid_value")


# pydantic's bound errors: which side of the bound the value fell, and the bound as OpenAI writes it.
_BOUNDS = {
    "greater_than_equal": ("below minimum", ">=", "ge"),
    "greater_than": ("below minimum", ">", "gt"),
    "less_than_equal": ("above maximum", "<=", "le"),
    "less_than": ("above maximum", "<", "lt"),
}


def _out_of_range(param: str, kind: str, value: float, ctx: dict[str, Any]) -> InvalidRequest:
    """A number outside its range, worded and coded as OpenAI's (`integer_below_min_value`, ...)."""
    side, sign, key = _BOUNDS[kind]
    bound = ctx.get(key)
    number = "decimal" if isinstance(bound, float) or isinstance(value, float) else "integer"
    code = f"{number}_{side.replace(' ', '_').replace('minimum', 'min').replace('maximum', 'max')}_value"
    return InvalidRequest(
        f"Invalid '{param}': {number} {side} value. Expected a value {sign} {bound:g}, but got {value} instead.",
        param=param,
        code=code,
    )


def _shown(value: Any) -> str:
    """A refused value as a message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

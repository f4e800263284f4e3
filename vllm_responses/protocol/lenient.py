"""`LenientModel`: the base of the request models, open to fields newer than ours and strict about JSON types."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["LenientModel", "undeclared"]


class LenientModel(BaseModel):
    """Accepts fields newer than ours (clients send them all the time); they are ignored. Strict about the
    JSON type of the fields it knows, as OpenAI is: `"stream": "yes"` or `"max_output_tokens": "5"` is a 400,
    not read as `true` or `5` (an integer where a number is asked for is fine)."""

    model_config = ConfigDict(extra="allow", strict=True)


def undeclared(model: BaseModel) -> dict[Any, Any]:
    """The fields `model` and the models inside it hold without declaring them (a newer client's), in the form
    pydantic's `model_dump(exclude=...)` takes: dumped without them, a model says only what we read of it."""
    out: dict[Any, Any] = dict.fromkeys(model.model_extra or {}, True)
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            inner: dict[Any, Any] = undeclared(value)
        elif isinstance(value, list):
            inner = {
                i: found for i, v in enumerate(value) if isinstance(v, BaseModel) and (found := undeclared(v))
            }
        else:
            continue
        if inner:
            out[name] = inner
    return out

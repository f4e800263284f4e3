"""`LenientModel`: the base of the request models, open to fields newer than ours and strict about JSON types."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["LenientModel"]


class LenientModel(BaseModel):
    """Accepts fields newer than ours (clients send them all the time); they are ignored. Strict about the
    JSON type of the fields it knows, as OpenAI is: `"stream": "yes"` or `"max_output_tokens": "5"` is a 400,
    not read as `true` or `5` (an integer where a number is asked for is fine)."""

    model_config = ConfigDict(extra="allow", strict=True)

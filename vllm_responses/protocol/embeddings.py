"""Wire shapes of `POST /v1/embeddings`: the create body we accept (checked: 400s naming the field) and the list we send."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, ValidationError

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.invalid import invalid_request
from vllm_responses.protocol.lenient import LenientModel

__all__ = ["MAX_INPUTS", "EmbeddingRequest", "embedding_list", "parse_embedding_request"]

# The most inputs one request may have, as OpenAI allows.
MAX_INPUTS = 2048


class EmbeddingRequest(LenientModel):
    """The create body. `input` is checked on its own (`parse_embedding_request`) into `inputs`."""

    model: str
    input: Any
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None

    @property
    def inputs(self) -> list[str | list[int]]:
        """`input` as a list of texts or token-id lists (one input given alone becomes a list of one)."""
        if isinstance(self.input, str):
            return [self.input]
        if self.input and all(isinstance(t, int) for t in self.input):
            return [list(self.input)]
        return list(self.input)


def parse_embedding_request(body: Any) -> EmbeddingRequest:
    """Validate a create body, raising `InvalidRequest` naming the offending `param`."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    try:
        req = EmbeddingRequest.model_validate(body)
    except ValidationError as exc:
        raise invalid_request(exc) from None
    _check_input(req.input)
    return req


def _check_input(value: Any) -> None:
    """A string, a list of strings, a list of token ids or a list of token-id lists; none empty; at most
    `MAX_INPUTS` of them."""
    if isinstance(value, str):
        if not value:
            raise InvalidRequest("'input' cannot be an empty string.", param="input")
        return
    if not isinstance(value, list):
        raise InvalidRequest(
            "Invalid type for 'input': expected a string, an array of strings, an array of token ids or an "
            "array of arrays of token ids.",
            param="input",
            code="invalid_type",
        )
    if not value:
        raise InvalidRequest("'input' cannot be an empty array.", param="input")
    if all(_is_token(t) for t in value):
        return  # one input as token ids
    if len(value) > MAX_INPUTS:
        raise InvalidRequest(
            f"'input' has {len(value)} items: at most {MAX_INPUTS} inputs may be embedded in one request.",
            param="input",
        )
    for i, item in enumerate(value):
        if isinstance(item, str):
            if not item:
                raise InvalidRequest(f"'input[{i}]' cannot be an empty string.", param=f"input[{i}]")
        elif isinstance(item, list) and item and all(_is_token(t) for t in item):
            continue
        else:
            raise InvalidRequest(
                f"Invalid value for 'input[{i}]': expected a non-empty string or a non-empty array of token ids "
                "(non-negative integers), and every item of 'input' of the same kind.",
                param=f"input[{i}]",
            )
    if len({isinstance(item, str) for item in value}) > 1:
        raise InvalidRequest("'input' mixes strings and token-id arrays: send one kind.", param="input")


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def embedding_list(
    vectors: Sequence[Sequence[float]], model: str, tokens: int, encoding: str
) -> dict[str, Any]:
    """The `CreateEmbeddingResponse` for `vectors`: each one a list of floats, or with `encoding` "base64" its
    little-endian float32 bytes in base64, as OpenAI sends them."""
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encoded(v, encoding)}
            for i, v in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _encoded(vector: Sequence[float], encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return list(vector)

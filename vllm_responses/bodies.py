"""Request bodies: read and parsed as JSON, or refused with a 400 naming `body`."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from vllm_responses.errors import InvalidRequest

__all__ = ["json_body"]


async def json_body(request: Request) -> Any:
    """The request's body as parsed JSON (any JSON value: the caller checks its shape)."""
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError:
        raise InvalidRequest(
            "The request body is not valid JSON.", param="body", code="invalid_json"
        ) from None

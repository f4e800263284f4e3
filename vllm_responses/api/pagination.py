"""Cursor pages (`{"object": "list", "data", "first_id", "last_id", "has_more"}`) from `order`, `limit`, `after`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest

__all__ = ["cursor_page", "page_params"]


def page_params(query: Mapping[str, str], *, default_order: str = "desc") -> tuple[str, int, str | None]:
    """`order`, `limit` and `after` of a list request; bad values are a 400 naming the parameter."""
    order = query.get("order", default_order)
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'.", param="order")
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        raise InvalidRequest("limit must be an integer.", param="limit") from None
    if not 1 <= limit <= 100:
        raise InvalidRequest("limit must be between 1 and 100.", param="limit")
    return order, limit, query.get("after") or None


def cursor_page(
    items: Sequence[dict[str, Any]], query: Mapping[str, str], *, default_order: str = "desc"
) -> dict[str, Any]:
    """One page of `items` (given oldest first) as the SDK's cursor page; bad parameters are a 400."""
    order, limit, after = page_params(query, default_order=default_order)
    ordered = list(items) if order == "asc" else list(reversed(items))
    if after:
        ids = [it["id"] for it in ordered]
        if after not in ids:
            raise InvalidRequest(f"No item with id {after!r} in this list.", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(ordered) > limit,
    }

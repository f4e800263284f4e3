"""The Vector Stores API's objects as the `openai` SDK types them (`VectorStore`, `VectorStoreFile`,
`VectorStoreFileBatch`, `VectorStoreSearchResponse`), and its cursor pages (`after`, `before`, `limit`, `order`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm_responses.api.params import page_params
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.retrieval.search import FoundChunk
from vllm_responses.retrieval.vector_store_records import BatchRow, FileCounts, FileRow
from vllm_responses.service.vector_stores import StoreView

__all__ = ["batch_json", "file_json", "hit_json", "page", "store_json"]


def store_json(view: StoreView) -> dict[str, Any]:
    row = view.row
    expires = None if row.expires_days is None else {"anchor": "last_active_at", "days": row.expires_days}
    return {
        "id": row.id,
        "object": "vector_store",
        "created_at": int(row.created_at),
        "name": row.name,
        "description": row.description,
        "usage_bytes": view.usage_bytes,
        "file_counts": view.counts.wire(),
        "status": view.status,
        "last_active_at": int(row.last_active_at),
        "metadata": row.metadata,
        "expires_after": expires,
        "expires_at": None if row.expires_at is None else int(row.expires_at),
    }


def file_json(row: FileRow) -> dict[str, Any]:
    return {
        "id": row.file_id,
        "object": "vector_store.file",
        "created_at": int(row.created_at),
        "vector_store_id": row.vector_store_id,
        "status": row.status,
        "usage_bytes": row.usage_bytes,
        "last_error": row.last_error,
        "attributes": row.attributes,
        "chunking_strategy": row.chunking,
    }


def batch_json(batch: BatchRow, status: str, counts: FileCounts) -> dict[str, Any]:
    return {
        "id": batch.id,
        "object": "vector_store.files_batch",
        "created_at": int(batch.created_at),
        "vector_store_id": batch.vector_store_id,
        "status": status,
        "file_counts": counts.wire(),
    }


def hit_json(found: FoundChunk) -> dict[str, Any]:
    hit = found.hit
    return {
        "file_id": hit.file_id,
        "filename": found.filename,
        "score": hit.score,
        "attributes": hit.attributes,
        "content": [{"type": "text", "text": hit.text}],
    }


def _cursor(query: Mapping[str, str], name: str, ids: list[str]) -> int | None:
    value = query.get(name) or None
    if value is None:
        return None
    if value not in ids:
        raise InvalidRequest(f"No object with id {value!r} in this list.", param=name)
    return ids.index(value)


def page(items: Sequence[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of `items` (given oldest first) as the SDK's cursor page: `order` (default desc), `limit` (1 to
    100, default 20), `after` and `before` (ids in the list); bad values are a 400 naming the parameter."""
    order, limit, _after = page_params(query)
    ordered = list(items) if order == "asc" else list(reversed(items))
    ids = [str(it["id"]) for it in ordered]
    before, after = _cursor(query, "before", ids), _cursor(query, "after", ids)
    start = 0 if after is None else after + 1
    end = len(ordered) if before is None else before
    window = ordered[start:end]
    shown = window[-limit:] if before is not None and after is None else window[:limit]
    more = len(window) > limit
    return {
        "object": "list",
        "data": shown,
        "first_id": shown[0]["id"] if shown else None,
        "last_id": shown[-1]["id"] if shown else None,
        "has_more": more,
    }

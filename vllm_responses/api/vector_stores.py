"""The `/v1/vector_stores` routes: vector stores, their files and file batches, and search, over
`VectorStoreService` (the caller's project's only). An object still in progress is answered with
`openai-poll-after-ms`, which the SDK's `*_and_poll` helpers wait for between retrieves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vllm_responses.api.auth import principal_of
from vllm_responses.api.params import json_body
from vllm_responses.api.state import app_state
from vllm_responses.api.vector_store_json import batch_json, file_json, hit_json, page, store_json
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.vector_stores import FILE_STATUSES, parse_text, string_list
from vllm_responses.retrieval.filters import parse_filter
from vllm_responses.retrieval.ranking import parse_max_num_results, parse_ranking_options
from vllm_responses.retrieval.search import MAX_QUERIES, MAX_QUERY_CHARS
from vllm_responses.service.vector_stores import VectorStoreService

__all__ = ["POLL_AFTER_MS", "vector_store_routes"]

POLL_AFTER_MS = 200  # what an in-progress object tells the SDK's pollers to wait


def _service(request: Request) -> VectorStoreService:
    return app_state(request).vector_stores


async def _body(request: Request) -> Mapping[str, Any]:
    body = await json_body(request)
    if not isinstance(body, Mapping):
        raise InvalidRequest("The body must be a JSON object.", param="body")
    return body


def _answer(body: dict[str, Any]) -> Response:
    headers = {"openai-poll-after-ms": str(POLL_AFTER_MS)} if body.get("status") == "in_progress" else None
    return JSONResponse(body, headers=headers)


def _ids(request: Request, *names: str) -> list[str]:
    return [request.path_params[n] for n in names]


# vector stores


async def create_store(request: Request) -> Response:
    view = await _service(request).create(principal_of(request).project, await _body(request))
    return _answer(store_json(view))


async def list_stores(request: Request) -> Response:
    views = await _service(request).all(principal_of(request).project)
    return JSONResponse(page([store_json(v) for v in views], request.query_params))


async def get_store(request: Request) -> Response:
    svc = _service(request)
    row = await svc.get(request.path_params["vector_store_id"], principal_of(request).project)
    return _answer(store_json(await svc.view(row)))


async def update_store(request: Request) -> Response:
    (store_id,) = _ids(request, "vector_store_id")
    view = await _service(request).update(store_id, principal_of(request).project, await _body(request))
    return _answer(store_json(view))


async def delete_store(request: Request) -> Response:
    (store_id,) = _ids(request, "vector_store_id")
    gone = await _service(request).delete(store_id, principal_of(request).project)
    return JSONResponse({"id": gone, "object": "vector_store.deleted", "deleted": True})


def _queries(query: object) -> list[str]:
    """A search's `query`: a string or a list of at most `MAX_QUERIES`, none blank nor over `MAX_QUERY_CHARS`
    (a 400 naming `query`, or `query[i]`)."""
    queries = [query] if isinstance(query, str) else string_list(query, "query", MAX_QUERIES)
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise InvalidRequest(
            "'query' must be a non-empty string or array of non-empty strings.", param="query"
        )
    for i, q in enumerate(queries):
        parse_text(q, "query" if isinstance(query, str) else f"query[{i}]", MAX_QUERY_CHARS)
    return queries


async def search(request: Request) -> Response:
    (store_id,) = _ids(request, "vector_store_id")
    body = await _body(request)
    queries = _queries(body.get("query"))
    if not isinstance(body.get("rewrite_query", False), bool):
        raise InvalidRequest("Invalid type for 'rewrite_query': expected a boolean.", param="rewrite_query")
    filters = None if body.get("filters") is None else parse_filter(body["filters"])
    found = await _service(request).search_one(
        store_id,
        principal_of(request).project,
        queries,
        filters=filters,
        ranking=parse_ranking_options(body.get("ranking_options")),
        max_num_results=parse_max_num_results(body.get("max_num_results")),
    )
    return JSONResponse(
        {
            "object": "vector_store.search_results.page",
            "search_query": queries,
            "data": [hit_json(f) for f in found],
            "has_more": False,
            "next_page": None,
        }
    )


# files


def _status_filter(request: Request) -> str | None:
    status = request.query_params.get("filter") or None
    if status is not None and status not in FILE_STATUSES:
        raise InvalidRequest(f"filter must be one of {', '.join(FILE_STATUSES)}.", param="filter")
    return status


async def add_file(request: Request) -> Response:
    (store_id,) = _ids(request, "vector_store_id")
    row = await _service(request).add_file(store_id, principal_of(request).project, await _body(request))
    return _answer(file_json(row))


async def list_files(request: Request) -> Response:
    svc = _service(request)
    store = await svc.get(request.path_params["vector_store_id"], principal_of(request).project)
    rows = await svc.rows.files(store.id, status=_status_filter(request))
    return JSONResponse(page([file_json(r) for r in rows], request.query_params))


async def get_file(request: Request) -> Response:
    store_id, file_id = _ids(request, "vector_store_id", "file_id")
    return _answer(
        file_json(await _service(request).get_file(store_id, file_id, principal_of(request).project))
    )


async def update_file(request: Request) -> Response:
    store_id, file_id = _ids(request, "vector_store_id", "file_id")
    project = principal_of(request).project
    row = await _service(request).set_attributes(store_id, file_id, project, await _body(request))
    return _answer(file_json(row))


async def delete_file(request: Request) -> Response:
    store_id, file_id = _ids(request, "vector_store_id", "file_id")
    gone = await _service(request).delete_file(store_id, file_id, principal_of(request).project)
    return JSONResponse({"id": gone, "object": "vector_store.file.deleted", "deleted": True})


async def file_content(request: Request) -> Response:
    store_id, file_id = _ids(request, "vector_store_id", "file_id")
    parts = await _service(request).file_content(store_id, file_id, principal_of(request).project)
    data = [{"type": "text", "text": t} for t in parts]
    return JSONResponse(
        {"object": "vector_store.file_content.page", "data": data, "has_more": False, "next_page": None}
    )


# file batches


async def create_batch(request: Request) -> Response:
    (store_id,) = _ids(request, "vector_store_id")
    svc = _service(request)
    batch = await svc.create_batch(store_id, principal_of(request).project, await _body(request))
    return _answer(batch_json(batch, *await svc.batch_status(batch)))


async def get_batch(request: Request) -> Response:
    store_id, batch_id = _ids(request, "vector_store_id", "batch_id")
    svc = _service(request)
    batch = await svc.get_batch(store_id, batch_id, principal_of(request).project)
    return _answer(batch_json(batch, *await svc.batch_status(batch)))


async def cancel_batch(request: Request) -> Response:
    store_id, batch_id = _ids(request, "vector_store_id", "batch_id")
    svc = _service(request)
    batch = await svc.cancel_batch(store_id, batch_id, principal_of(request).project)
    return _answer(batch_json(batch, *await svc.batch_status(batch)))


async def batch_files(request: Request) -> Response:
    store_id, batch_id = _ids(request, "vector_store_id", "batch_id")
    svc = _service(request)
    batch = await svc.get_batch(store_id, batch_id, principal_of(request).project)
    rows = await svc.rows.files(batch.vector_store_id, status=_status_filter(request), batch_id=batch.id)
    return JSONResponse(page([file_json(r) for r in rows], request.query_params))


def vector_store_routes() -> list[Route]:
    root = "/v1/vector_stores"
    one = root + "/{vector_store_id}"
    file = one + "/files/{file_id}"
    batch = one + "/file_batches/{batch_id}"
    return [
        Route(root, create_store, methods=["POST"]),
        Route(root, list_stores, methods=["GET"]),
        Route(one, get_store, methods=["GET"]),
        Route(one, update_store, methods=["POST"]),
        Route(one, delete_store, methods=["DELETE"]),
        Route(one + "/search", search, methods=["POST"]),
        Route(one + "/files", add_file, methods=["POST"]),
        Route(one + "/files", list_files, methods=["GET"]),
        Route(file, get_file, methods=["GET"]),
        Route(file, update_file, methods=["POST"]),
        Route(file, delete_file, methods=["DELETE"]),
        Route(file + "/content", file_content, methods=["GET"]),
        Route(one + "/file_batches", create_batch, methods=["POST"]),
        Route(batch, get_batch, methods=["GET"]),
        Route(batch + "/cancel", cancel_batch, methods=["POST"]),
        Route(batch + "/files", batch_files, methods=["GET"]),
    ]

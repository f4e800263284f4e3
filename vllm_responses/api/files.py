"""The `/v1/files` routes: a multipart upload, list, retrieve, content and delete (which also removes the file
from every vector store that holds it), over `FileService`."""

from __future__ import annotations

import mimetypes
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from vllm_responses.api.auth import principal_of
from vllm_responses.api.state import app_state
from vllm_responses.protocol.errors import InvalidRequest, PayloadTooLarge
from vllm_responses.protocol.files import expires_after_s, plain_filename, purpose_of
from vllm_responses.store.base import StoredFile

__all__ = ["INERT", "file_json", "file_routes", "read_upload"]

# A downloaded file is what a client wrote: a browser must neither guess its type nor run it.
INERT = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}
# The most files one list returns (OpenAI's bound and default).
_LIST_MOST = 10_000


def file_json(file: StoredFile) -> dict[str, Any]:
    """A file as `openai.types.FileObject`."""
    return {
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": int(file.created_at),
        "expires_at": int(file.expires_at) if file.expires_at is not None else None,
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "status_details": None,
    }


async def read_upload(form: FormData, field: str, limit: int) -> tuple[str | None, bytes]:
    """The file in multipart field `field`: its name as sent and its bytes (a 400 naming `field` when there is
    none, a 413 past `limit`, this server's `--max-upload-bytes`)."""
    upload = form.get(field)
    if not isinstance(upload, UploadFile):
        raise InvalidRequest(f"The multipart body needs a '{field}' field holding the file.", param=field)
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(
            f"The file is larger than {limit} bytes, this server's limit (--max-upload-bytes).",
            param=field,
            code="file_too_large",
        )
    return upload.filename, data


def _multipart(request: Request, field: str) -> None:
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidRequest(f"Send the file as multipart/form-data with a '{field}' field.", param=field)


def _expiry(form: FormData) -> float | None:
    """The form's `expires_after` (`expires_after[anchor]`, `expires_after[seconds]`) in seconds, if given."""
    anchor, seconds = form.get("expires_after[anchor]"), form.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    return expires_after_s(anchor, seconds)


async def create_file(request: Request) -> Response:
    _multipart(request, "file")
    svc = app_state(request).service
    limit = svc.config.max_upload_bytes
    async with request.form(max_files=1, max_fields=16) as form:
        purpose = purpose_of(form.get("purpose"))
        expires_s = _expiry(form)
        raw_name, data = await read_upload(form, "file", limit)
    name = plain_filename(raw_name, "file")
    file = await svc.files.create(principal_of(request).project, name, purpose, data, expires_s)
    return JSONResponse(file_json(file))


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", str(_LIST_MOST))
    try:
        limit = int(raw)
    except ValueError:
        raise InvalidRequest("limit must be an integer.", param="limit") from None
    if not 1 <= limit <= _LIST_MOST:
        raise InvalidRequest(f"limit must be between 1 and {_LIST_MOST}.", param="limit")
    return limit


async def list_files(request: Request) -> Response:
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'.", param="order")
    purpose = query.get("purpose") or None
    page, more = await app_state(request).service.files.page(
        principal_of(request).project,
        purpose=purpose,
        after=query.get("after") or None,
        limit=_limit(request),
        descending=order == "desc",
    )
    data = [file_json(f) for f in page]
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": more,
        }
    )


async def _file(request: Request) -> StoredFile:
    return await app_state(request).service.files.get(
        request.path_params["file_id"], principal_of(request).project
    )


async def get_file(request: Request) -> Response:
    return JSONResponse(file_json(await _file(request)))


async def get_file_content(request: Request) -> Response:
    file = await _file(request)
    media = mimetypes.guess_type(file.filename)[0] or "application/octet-stream"
    headers = {
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(file.filename, safe='')}",
        "Content-Length": str(file.bytes),
        **INERT,
    }
    chunks = app_state(request).service.files.chunks(file)
    return StreamingResponse(chunks, media_type=media, headers=headers)


async def delete_file(request: Request) -> Response:
    state = app_state(request)
    file = await state.service.files.delete(request.path_params["file_id"], principal_of(request).project)
    if state.vector_stores is not None:
        await state.vector_stores.forget_file(file.id)
    return JSONResponse({"id": file.id, "object": "file", "deleted": True})


def file_routes() -> list[Route]:
    one = "/v1/files/{file_id}"
    return [
        Route("/v1/files", create_file, methods=["POST"]),
        Route("/v1/files", list_files, methods=["GET"]),
        Route(one, get_file, methods=["GET"]),
        Route(one, delete_file, methods=["DELETE"]),
        Route(one + "/content", get_file_content, methods=["GET"]),
    ]

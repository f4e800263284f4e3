"""The `/v1/uploads` routes: create, add a part (multipart `data`), complete and cancel, over `UploadService`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vllm_responses.api.auth import principal_of
from vllm_responses.api.files import file_json, read_upload
from vllm_responses.api.params import json_body
from vllm_responses.api.state import app_state
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.files import (
    PART_MOST_BYTES,
    CompleteUpload,
    CreateUpload,
    expires_after_s,
    parse_body,
    plain_filename,
    purpose_of,
)
from vllm_responses.store.base import StoredUpload

__all__ = ["upload_routes"]


async def upload_json(request: Request, upload: StoredUpload) -> dict[str, Any]:
    """An upload as `openai.types.Upload` (with its file once completed)."""
    file = None
    if upload.file_id is not None:
        files = app_state(request).service.files
        file = file_json(await files.get(upload.file_id, upload.project))
    return {
        "id": upload.id,
        "object": "upload",
        "bytes": upload.bytes,
        "created_at": int(upload.created_at),
        "expires_at": int(upload.expires_at),
        "filename": upload.filename,
        "purpose": upload.purpose,
        "status": upload.status,
        "file": file,
    }


async def create_upload(request: Request) -> Response:
    req: CreateUpload = parse_body(CreateUpload, await json_body(request))
    if plain_filename(req.filename, "filename") != req.filename:
        raise InvalidRequest("filename must be a plain file name, with no folders.", param="filename")
    purpose = purpose_of(req.purpose)
    expires = req.expires_after
    expires_s = expires_after_s(expires.anchor, expires.seconds) if expires is not None else None
    upload = await app_state(request).service.uploads.create(
        principal_of(request).project, req, purpose, expires_s
    )
    return JSONResponse(await upload_json(request, upload))


async def add_part(request: Request) -> Response:
    upload_id, project = request.path_params["upload_id"], principal_of(request).project
    uploads = app_state(request).service.uploads
    await uploads.get(upload_id, project)  # 404 before reading a large body
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidRequest("Send the part as multipart/form-data with a 'data' field.", param="data")
    limit = min(PART_MOST_BYTES, app_state(request).service.config.max_upload_bytes)
    async with request.form(max_files=1, max_fields=16) as form:
        _, data = await read_upload(form, "data", limit)
    part_id, created_at = await uploads.add_part(upload_id, project, data)
    return JSONResponse(
        {"id": part_id, "object": "upload.part", "created_at": int(created_at), "upload_id": upload_id}
    )


async def complete_upload(request: Request) -> Response:
    req: CompleteUpload = parse_body(CompleteUpload, await json_body(request))
    svc = app_state(request).service.uploads
    upload = await svc.complete(request.path_params["upload_id"], principal_of(request).project, req)
    return JSONResponse(await upload_json(request, upload))


async def cancel_upload(request: Request) -> Response:
    svc = app_state(request).service.uploads
    upload = await svc.cancel(request.path_params["upload_id"], principal_of(request).project)
    return JSONResponse(await upload_json(request, upload))


def upload_routes() -> list[Route]:
    one = "/v1/uploads/{upload_id}"
    return [
        Route("/v1/uploads", create_upload, methods=["POST"]),
        Route(one + "/parts", add_part, methods=["POST"]),
        Route(one + "/complete", complete_upload, methods=["POST"]),
        Route(one + "/cancel", cancel_upload, methods=["POST"]),
    ]

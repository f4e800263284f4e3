"""The `/v1/containers` routes: parse the request, call `ContainerService`, serialize its answer."""

from __future__ import annotations

import mimetypes
import posixpath
from urllib.parse import quote

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interpreter_service import FileInfo
from vllm_responses.api.auth import principal_of
from vllm_responses.api.params import cursor_page, json_body
from vllm_responses.api.state import app_state
from vllm_responses.protocol.containers import container_json, file_json, parse_create_container
from vllm_responses.protocol.errors import InvalidRequest, NotFound, PayloadTooLarge
from vllm_responses.protocol.ids import is_id

__all__ = ["container_routes"]

# A downloaded file is what code or a client wrote: a browser must neither guess its type nor run it.
_INERT = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}


def _check_ids(request: Request) -> None:
    """A 404 for a `container_id` or `file_id` in the path that is not of the form this server issues: it names
    nothing, and never reaches the sandbox's URLs."""
    cid = request.path_params["container_id"]
    if not is_id(cid, "cntr"):
        raise NotFound(f"Container {cid!r} not found or expired.", param="container_id")
    fid = request.path_params.get("file_id")
    if fid is not None and not is_id(fid, "cfile"):
        raise NotFound(f"No file {fid!r} in container {cid!r}.", param="file_id")


async def _file(request: Request) -> FileInfo:
    """The file the path names; a 404 naming `file_id` when its container has no such file."""
    _check_ids(request)
    cid, fid = request.path_params["container_id"], request.path_params["file_id"]
    info = await app_state(request).service.containers.file(cid, fid, principal_of(request).project)
    if info is None:
        raise NotFound(f"No file {fid!r} in container {cid!r}.", param="file_id")
    return info


async def create_container(request: Request) -> Response:
    svc, project = app_state(request).service, principal_of(request).project
    req = parse_create_container(await json_body(request))
    files = await svc.files.get_all(req.file_ids, project, "file_ids")  # each a 404 naming it, first
    info = await svc.containers.create(
        name=req.name,
        memory_limit=req.memory_limit,
        expires_after_s=req.expires_after.minutes * 60.0 if req.expires_after is not None else None,
        project=project,
        files=files,
    )
    return JSONResponse(container_json(info, svc.containers.expires_after_s(info)))


async def list_containers(request: Request) -> Response:
    svc = app_state(request).service.containers
    infos = await svc.list_all(principal_of(request).project)
    if name := request.query_params.get("name"):
        infos = [i for i in infos if i.name == name]
    return JSONResponse(
        cursor_page([container_json(i, svc.expires_after_s(i)) for i in infos], request.query_params)
    )


async def get_container(request: Request) -> Response:
    _check_ids(request)
    svc = app_state(request).service.containers
    info = await svc.get(request.path_params["container_id"], principal_of(request).project)
    return JSONResponse(container_json(info, svc.expires_after_s(info)))


async def delete_container(request: Request) -> Response:
    _check_ids(request)
    cid = request.path_params["container_id"]
    await app_state(request).service.containers.delete(cid, principal_of(request).project)
    return JSONResponse({"id": cid, "object": "container.deleted", "deleted": True})


def _filename(raw: str | None) -> str:
    """The name an upload is stored under in the data folder: its base name, with no path tricks."""
    name = posixpath.basename((raw or "").replace("\\", "/")).strip()
    if not name or name in (".", "..") or "\x00" in name or len(name) > 255:
        raise InvalidRequest("The uploaded file needs a plain file name.", param="file")
    return name


async def create_file(request: Request) -> Response:
    _check_ids(request)
    svc = app_state(request).service.containers
    cid = request.path_params["container_id"]
    ctype = request.headers.get("content-type", "")
    project = principal_of(request).project
    if ctype.startswith("application/json"):
        return JSONResponse(file_json(await _copy_file(request, cid, project)))
    if not ctype.startswith("multipart/form-data"):
        raise InvalidRequest(
            "Upload the file as multipart/form-data with a 'file' field, or send JSON naming a file_id.",
            param="file",
        )
    await svc.get(cid, project)  # 404 before reading a large body (another project's too)
    # The body is bounded while it streams in (middleware.py); the file itself is held to the exact limit.
    limit = app_state(request).service.config.max_upload_bytes
    async with request.form(max_files=1, max_fields=16) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("The multipart body needs a 'file' field holding the file.", param="file")
        name = _filename(upload.filename)
        data = await upload.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(
            f"The file is larger than {limit} bytes, this server's limit (--max-upload-bytes).",
            param="file",
            code="file_too_large",
        )
    return JSONResponse(file_json(await svc.upload(cid, name, data, project)))


async def _copy_file(request: Request, container_id: str, project: str) -> FileInfo:
    """`{"file_id": ...}`: the caller's file of the Files API copied into the container."""
    body = await json_body(request)
    file_id = body.get("file_id") if isinstance(body, dict) else None
    if not isinstance(file_id, str):
        raise InvalidRequest(
            "The JSON body needs a file_id (or upload the file as multipart).", param="file_id"
        )
    svc = app_state(request).service
    await svc.containers.get(container_id, project)
    file = await svc.files.get(file_id, project, "file_id")
    return (await svc.containers.copy_files(container_id, [file]))[0]


async def list_files(request: Request) -> Response:
    _check_ids(request)
    cid, project = request.path_params["container_id"], principal_of(request).project
    infos = await app_state(request).service.containers.files(cid, project)
    return JSONResponse(cursor_page([file_json(i) for i in infos], request.query_params))


async def get_file(request: Request) -> Response:
    return JSONResponse(file_json(await _file(request)))


async def get_file_content(request: Request) -> Response:
    info = await _file(request)
    data = await app_state(request).service.containers.content(info)
    name = posixpath.basename(info.path)
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    disposition = f"attachment; filename*=UTF-8''{quote(name, safe='')}"
    return Response(data, media_type=media, headers={"Content-Disposition": disposition, **_INERT})


async def delete_file(request: Request) -> Response:
    info = await _file(request)
    await app_state(request).service.containers.delete_file(info)
    return JSONResponse({"id": info.id, "object": "container.file.deleted", "deleted": True})


def container_routes() -> list[Route]:
    base = "/v1/containers"
    one = base + "/{container_id}"
    return [
        Route(base, create_container, methods=["POST"]),
        Route(base, list_containers, methods=["GET"]),
        Route(one, get_container, methods=["GET"]),
        Route(one, delete_container, methods=["DELETE"]),
        Route(one + "/files", create_file, methods=["POST"]),
        Route(one + "/files", list_files, methods=["GET"]),
        Route(one + "/files/{file_id}", get_file, methods=["GET"]),
        Route(one + "/files/{file_id}", delete_file, methods=["DELETE"]),
        Route(one + "/files/{file_id}/content", get_file_content, methods=["GET"]),
    ]

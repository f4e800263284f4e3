"""Containers and container files: `/v1/containers` over the sandbox pool, in the `openai` SDK's wire shapes.

`ContainerService` owns every lookup of a container by id (the responses service uses it too), so that
a container's own `expires_after` is enforced in one place; the routes at the bottom only parse and
serialize. A container file's id is the one the interpreter gives it (stable: a hash of container and
path), so a file written by code and cited in a response can be fetched later by that id.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import posixpath
import time
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import quote

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interpreter_service import (
    ContainerInfo,
    ContainerNotFound,
    FileInfo,
    Interpreter,
    InterpreterError,
    PoolExhausted,
)
from vllm_responses.errors import Busy, InvalidRequest, NotFound, Unavailable
from vllm_responses.pagination import cursor_page
from vllm_responses.protocol.containers import CreateContainerRequest, parse_create_container

__all__ = [
    "DATA_DIR",
    "MAX_UPLOAD_BYTES",
    "ContainerService",
    "container_json",
    "container_routes",
    "file_json",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

DATA_DIR = "/mnt/data"
MAX_UPLOAD_BYTES = 64 * 1024 * 1024
_MEMORY_LIMITS = ("1g", "4g", "16g", "64g")


def container_json(info: ContainerInfo, expires_after_s: float) -> dict[str, Any]:
    """A container as `openai.types.ContainerRetrieveResponse`."""
    out: dict[str, Any] = {
        "id": info.id,
        "object": "container",
        "created_at": int(info.created_at),
        "status": info.status,
        "expires_after": {"anchor": "last_active_at", "minutes": max(1, round(expires_after_s / 60))},
        "last_active_at": int(info.last_active_at),
        "name": info.name or "",
    }
    if info.memory_limit in _MEMORY_LIMITS:
        out["memory_limit"] = info.memory_limit
    return out


def file_json(info: FileInfo) -> dict[str, Any]:
    """A container file as `openai.types.containers.FileRetrieveResponse`."""
    return {
        "id": info.id,
        "object": "container.file",
        "bytes": info.bytes,
        "container_id": info.container_id,
        "created_at": int(info.created_at),
        "path": info.path,
        "source": info.source,
    }


class ContainerService:
    """Containers of one interpreter, with the per-container idle expiry the pool does not know about.

    The pool expires every container after its own idle time (`--code-interpreter-idle-expiry`); a
    container created with a shorter `expires_after` is deleted here when it is next looked up past it.
    A longer one is capped at the pool's.
    """

    def __init__(self, interpreter: Interpreter | None) -> None:
        self.interpreter = interpreter
        self._expiry_s: dict[str, float] = {}

    def _interp(self) -> Interpreter:
        if self.interpreter is None:
            raise InvalidRequest(
                "The code interpreter is disabled on this server, so there are no containers.",
                param=None,
                code="unsupported_value",
            )
        return self.interpreter

    def expires_after_s(self, info: ContainerInfo) -> float:
        return min(self._expiry_s.get(info.id, info.expires_after_s), info.expires_after_s)

    async def _expire(self, info: ContainerInfo) -> bool:
        if time.time() - info.last_active_at <= self.expires_after_s(info):
            return False
        logger.info("container %s expired (idle past its expires_after)", info.id)
        self._expiry_s.pop(info.id, None)
        try:
            await self._interp().delete_container(info.id)
        except ContainerNotFound:
            pass
        return True

    async def get(self, container_id: str, *, param: str | None = "container_id") -> ContainerInfo:
        """A live container; 404 naming `param` when it is unknown, deleted or expired."""
        try:
            info = await self._interp().get_container(container_id)
        except ContainerNotFound:
            info = None
        if info is None or await self._expire(info):
            self._expiry_s.pop(container_id, None)
            raise NotFound(f"Container {container_id!r} not found or expired.", param=param)
        return info

    async def create(
        self, req: CreateContainerRequest | None = None, *, memory_limit: str | None = None
    ) -> ContainerInfo:
        """A new container (`req` None: an unnamed one, as a response's `auto` container)."""
        interp = self._interp()
        try:
            info = await interp.create_container(
                name=req.name if req else None, memory_limit=req.memory_limit if req else memory_limit
            )
        except PoolExhausted as exc:
            raise Busy(
                f"Every code-interpreter sandbox is busy running code ({exc}); retry later or delete a container.",
                code="pool_exhausted",
            ) from exc
        except InterpreterError as exc:
            raise Unavailable(f"No code-interpreter sandbox could be started: {exc}") from exc
        if req is not None and req.expires_after is not None:
            self._expiry_s[info.id] = req.expires_after.minutes * 60.0
        return info

    async def list_all(self) -> list[ContainerInfo]:
        live = [info for info in await self._interp().list_containers() if not await self._expire(info)]
        return sorted(live, key=lambda i: i.created_at)

    async def delete(self, container_id: str) -> None:
        await self.get(container_id)
        self._expiry_s.pop(container_id, None)
        try:
            await self._interp().delete_container(container_id)
        except ContainerNotFound:
            raise NotFound(
                f"Container {container_id!r} not found or expired.", param="container_id"
            ) from None

    # --- files --------------------------------------------------------------------------------------

    async def files(self, container_id: str) -> list[FileInfo]:
        await self.get(container_id)
        infos = await self._file_call(self._interp().list_files(container_id))
        return sorted(infos, key=lambda f: (f.created_at, f.path))

    async def file(self, container_id: str, file_id: str) -> FileInfo:
        for info in await self.files(container_id):
            if info.id == file_id:
                return info
        raise NotFound(f"No file {file_id!r} in container {container_id!r}.", param="file_id")

    async def upload(self, container_id: str, filename: str, data: bytes) -> FileInfo:
        await self.get(container_id)
        return await self._file_call(self._interp().write_file(container_id, f"{DATA_DIR}/{filename}", data))

    async def content(self, container_id: str, file_id: str) -> tuple[FileInfo, bytes]:
        info = await self.file(container_id, file_id)
        return info, await self._file_call(self._interp().read_file(container_id, info.path))

    async def delete_file(self, container_id: str, file_id: str) -> None:
        info = await self.file(container_id, file_id)
        await self._file_call(self._interp().delete_file(container_id, info.path))

    async def _file_call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except ContainerNotFound:
            raise NotFound("Container not found or expired.", param="container_id") from None
        except InterpreterError as exc:
            raise Unavailable(f"The sandbox could not complete the file operation: {exc}") from exc


# --- routes ---------------------------------------------------------------------------------------


def _service(request: Request) -> ContainerService:
    return request.app.state.vr.service.containers  # type: ignore[no-any-return]


async def _json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError:
        raise InvalidRequest(
            "The request body is not valid JSON.", param="body", code="invalid_json"
        ) from None


async def create_container(request: Request) -> Response:
    svc = _service(request)
    info = await svc.create(parse_create_container(await _json(request)))
    return JSONResponse(container_json(info, svc.expires_after_s(info)))


async def list_containers(request: Request) -> Response:
    svc = _service(request)
    infos = await svc.list_all()
    if name := request.query_params.get("name"):
        infos = [i for i in infos if i.name == name]
    return JSONResponse(
        cursor_page([container_json(i, svc.expires_after_s(i)) for i in infos], request.query_params)
    )


async def get_container(request: Request) -> Response:
    svc = _service(request)
    info = await svc.get(request.path_params["container_id"])
    return JSONResponse(container_json(info, svc.expires_after_s(info)))


async def delete_container(request: Request) -> Response:
    cid = request.path_params["container_id"]
    await _service(request).delete(cid)
    return JSONResponse({"id": cid, "object": "container.deleted", "deleted": True})


def _filename(raw: str | None) -> str:
    """The name an upload is stored under in /mnt/data: its base name, with no path tricks."""
    name = posixpath.basename((raw or "").replace("\\", "/")).strip()
    if not name or name in (".", "..") or "\x00" in name or len(name) > 255:
        raise InvalidRequest("The uploaded file needs a plain file name.", param="file")
    return name


async def create_file(request: Request) -> Response:
    svc = _service(request)
    cid = request.path_params["container_id"]
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("application/json"):
        body = await _json(request)
        param = "file_id" if isinstance(body, dict) and "file_id" in body else "file"
        raise InvalidRequest(
            "This server has no Files API, so file_id cannot be used: upload the content as multipart/form-data "
            "with a 'file' field.",
            param=param,
            code="unsupported_parameter",
        )
    if not ctype.startswith("multipart/form-data"):
        raise InvalidRequest("Upload the file as multipart/form-data with a 'file' field.", param="file")
    await svc.get(cid)  # 404 before reading a large body
    async with request.form(max_files=1, max_fields=16) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("The multipart body needs a 'file' field holding the file.", param="file")
        name = _filename(upload.filename)
        data = await upload.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise InvalidRequest(
            f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB.",
            param="file",
            code="file_too_large",
        )
    return JSONResponse(file_json(await svc.upload(cid, name, data)))


async def list_files(request: Request) -> Response:
    infos = await _service(request).files(request.path_params["container_id"])
    return JSONResponse(cursor_page([file_json(i) for i in infos], request.query_params))


async def get_file(request: Request) -> Response:
    p = request.path_params
    return JSONResponse(file_json(await _service(request).file(p["container_id"], p["file_id"])))


async def get_file_content(request: Request) -> Response:
    p = request.path_params
    info, data = await _service(request).content(p["container_id"], p["file_id"])
    name = posixpath.basename(info.path)
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    disposition = f"attachment; filename*=UTF-8''{quote(name, safe='')}"
    return Response(data, media_type=media, headers={"Content-Disposition": disposition})


async def delete_file(request: Request) -> Response:
    p = request.path_params
    await _service(request).delete_file(p["container_id"], p["file_id"])
    return JSONResponse({"id": p["file_id"], "object": "container.file.deleted", "deleted": True})


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

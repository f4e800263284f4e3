"""`ContainerFiles`: the file operations on a container, carried out by its worker in chunks."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Literal

from interpreter_service.api import DATA_DIR, FileInfo, InterpreterError, data_path
from interpreter_service.pool.containers import Container, ContainerTable
from interpreter_service.process.worker_protocol import AnyReply

__all__ = ["CHUNK_BYTES", "ContainerFiles", "FileRequest", "OpenRequests"]

# Files travel to and from a worker in chunks of this size (one request each), well under the protocol's
# line limit (worker.STREAM_LIMIT) once base64-encoded.
CHUNK_BYTES = 4 << 20
FileRequest = Callable[..., Awaitable[AnyReply]]  # (op, **fields): one request to a container's worker
OpenRequests = Callable[[Container], AbstractAsyncContextManager[FileRequest]]


class ContainerFiles:
    """`write_file`, `read_file`, `delete_file` and `list_files` of `Interpreter` over the pool's containers.

    `requests(c)` opens a container's worker for file requests: its `FileRequest`, under the container's
    lock while the context is open (the chunks of one transfer take the lock once), with a live worker."""

    def __init__(self, containers: ContainerTable, requests: OpenRequests) -> None:
        self._containers = containers
        self._file_requests = requests

    async def _file_request(self, c: Container, op: str, **fields: object) -> AnyReply:
        async with self._file_requests(c) as request:
            return await request(op, **fields)

    def _file_info(
        self, c: Container, path: str, size: int, source: Literal["user", "assistant"]
    ) -> FileInfo:
        old = c.files.get(path)
        fid = "cfile_" + hashlib.sha256(f"{c.id}:{path}".encode()).hexdigest()[:24]
        info = FileInfo(
            id=fid,
            container_id=c.id,
            path=path,
            bytes=size,
            created_at=old.created_at if old else time.time(),
            source=old.source if old else source,
        )
        c.files[path] = info
        return info

    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        """Written in chunks; the container's files may take at most its memory_limit (a file past it is
        refused, or deleted if the room ran out part way)."""
        c = self._containers.live(container_id)
        full = data_path(path)
        if len(data) > c.tier:
            raise InterpreterError(
                f"cannot write {full}: {len(data)} bytes does not fit in the container's memory (its files "
                f"may take at most {c.tier} bytes, its memory_limit)"
            )
        view = memoryview(data)
        try:
            async with self._file_requests(c) as request:
                for off in range(0, max(len(data), 1), CHUNK_BYTES):
                    chunk = base64.b64encode(view[off : off + CHUNK_BYTES]).decode()
                    reply = await request(
                        "write_file", path=full, data_b64=chunk, append=off > 0, max_bytes=c.tier
                    )
        except InterpreterError as e:
            raise InterpreterError(f"cannot write {full}: {e}") from e
        c.files.pop(reply["path"], None)
        return self._file_info(c, reply["path"], int(reply["bytes"]), "user")

    async def read_file(self, container_id: str, path: str) -> bytes:
        """Read in chunks of `CHUNK_BYTES`, all under one hold of the container's lock."""
        c = self._containers.live(container_id)
        full = data_path(path)
        parts: list[bytes] = []
        got, size = 0, 1
        try:
            async with self._file_requests(c) as request:
                while got < size:
                    reply = await request("read_file", path=full, offset=got, length=CHUNK_BYTES)
                    parts.append(part := base64.b64decode(reply["data_b64"]))
                    got, size = got + len(part), int(reply["size"])
                    if not part:
                        break
        except InterpreterError as e:
            raise InterpreterError(f"cannot read {full}: {e}") from e
        return b"".join(parts)

    async def delete_file(self, container_id: str, path: str) -> None:
        c = self._containers.live(container_id)
        full = data_path(path)
        try:
            reply = await self._file_request(c, "delete_file", path=full)
        except InterpreterError as e:
            raise InterpreterError(f"cannot delete {full}: {e}") from e
        c.files.pop(reply["path"], None)

    async def list_files(self, container_id: str) -> list[FileInfo]:
        c = self._containers.live(container_id)
        reply = await self._file_request(c, "list_files", dir=DATA_DIR)
        return [self._file_info(c, f["path"], int(f["bytes"]), "assistant") for f in reply["files"]]

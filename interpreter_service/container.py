"""`Container`, the pool's record of one container, and `ContainerFiles`, the file operations on it."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal

from interpreter_service.api import DATA_DIR, FileInfo, InterpreterError, data_path
from interpreter_service.worker import WorkerProcess
from interpreter_service.worker_protocol import AnyReply

__all__ = ["CHUNK_BYTES", "Container", "ContainerFiles", "FileRequest"]

# Files travel to and from a worker in chunks of this size (one request each), well under the protocol's
# line limit (worker.STREAM_LIMIT) once base64-encoded.
CHUNK_BYTES = 4 << 20
FileRequest = Callable[..., Awaitable[AnyReply]]  # (op, **fields): one request to a container's worker


@dataclass
class Container:
    """One container: its worker, the lock its calls queue on, its room in the budget, its files."""

    id: str
    created_at: float
    last_active_at: float
    name: str | None
    memory_limit: str | None
    cost: int  # the worker's caps: its WebAssembly heap cap + JS heap cap
    charge: int  # bytes charged in the memory budget now (`charges.Charges.of`)
    tier: int  # the WebAssembly heap cap
    worker: WorkerProcess | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    files: dict[str, FileInfo] = field(default_factory=dict)
    lost_state: bool = False  # the worker was replaced and no result has said so yet
    lost_reason: str = ""  # why (the old worker's end), said with that result
    pins: int = 0  # callers using it between calls (never evicted while pinned)
    expires_after_s: float | None = None  # its own idle expiry, when shorter than the pool's
    owner: str | None = None  # the label its creator gave (`ContainerInfo.owner`)


class ContainerFiles:
    """`write_file`, `read_file`, `delete_file` and `list_files` of `Interpreter`, for a pool that provides
    `_get` (a container by id) and `_file_requests` (its worker's `FileRequest`, under its lock while the
    context is open: the chunks of one transfer take the lock once)."""

    def _get(self, container_id: str) -> Container:
        raise NotImplementedError

    def _file_requests(self, c: Container) -> AbstractAsyncContextManager[FileRequest]:
        raise NotImplementedError

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
        c = self._get(container_id)
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
        c = self._get(container_id)
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
        c = self._get(container_id)
        full = data_path(path)
        try:
            reply = await self._file_request(c, "delete_file", path=full)
        except InterpreterError as e:
            raise InterpreterError(f"cannot delete {full}: {e}") from e
        c.files.pop(reply["path"], None)

    async def list_files(self, container_id: str) -> list[FileInfo]:
        c = self._get(container_id)
        reply = await self._file_request(c, "list_files", dir=DATA_DIR)
        return [self._file_info(c, f["path"], int(f["bytes"]), "assistant") for f in reply["files"]]

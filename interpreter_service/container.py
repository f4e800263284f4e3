"""`Container`, the pool's record of one container, and `ContainerFiles`, the file operations on it."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from dataclasses import dataclass, field
from typing import Literal

from interpreter_service.api import DATA_DIR, FileInfo, InterpreterError, data_path
from interpreter_service.worker import Reply, WorkerProcess

__all__ = ["Container", "ContainerFiles"]


@dataclass
class Container:
    """One container: its worker, the lock its calls queue on, its room in the budget, its files."""

    id: str
    created_at: float
    last_active_at: float
    name: str | None
    memory_limit: str | None
    cost: int  # bytes reserved in the memory budget: the worker's WebAssembly heap cap + JS heap cap
    tier: int  # the WebAssembly heap cap
    worker: WorkerProcess | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    files: dict[str, FileInfo] = field(default_factory=dict)
    lost_state: bool = False  # the worker was replaced and no result has said so yet
    lost_reason: str = ""  # why (the old worker's end), said with that result
    pins: int = 0  # callers using it between calls (never evicted while pinned)
    expires_after_s: float | None = None  # its own idle expiry, when shorter than the pool's


class ContainerFiles:
    """`write_file`, `read_file`, `delete_file` and `list_files` of `Interpreter`, for a pool that provides
    `_get` (a container by id) and `_file_request` (one request to its worker, under its lock)."""

    def _get(self, container_id: str) -> Container:
        raise NotImplementedError

    async def _file_request(self, c: Container, op: str, **fields: object) -> Reply:
        raise NotImplementedError

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
        c = self._get(container_id)
        full = data_path(path)
        reply = await self._file_request(c, "write_file", path=full, data_b64=base64.b64encode(data).decode())
        c.files.pop(reply["path"], None)
        return self._file_info(c, reply["path"], int(reply["bytes"]), "user")

    async def read_file(self, container_id: str, path: str) -> bytes:
        c = self._get(container_id)
        full = data_path(path)
        try:
            reply = await self._file_request(c, "read_file", path=full)
        except InterpreterError as e:
            raise InterpreterError(f"cannot read {full}: {e}") from e
        return base64.b64decode(reply["data_b64"])

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

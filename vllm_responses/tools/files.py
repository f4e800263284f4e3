"""`FileService`: the files of the Files API, kept in the store (so every replica reads them), per project.

A file is `project`'s, whose API key made it: to any other project it does not exist (the same `NotFound` as
an unknown id). One past its `expires_at` is not found either, and is deleted when looked up; the store's
`sweep_files` drops the rest (at open, on its prune, and here at most once a minute as files are made). Each
new file is checked against its project's stored bytes first (`check`: `ProjectLimits.check_store`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from vllm_responses.protocol.errors import NotFound
from vllm_responses.protocol.files import is_file_id, new_file_id
from vllm_responses.store.base import ResponseStore, StoredFile

__all__ = ["FileService", "StoreCheck"]

logger = logging.getLogger(__name__)

# `ProjectLimits.check_store` over the store: (project, bytes to add, param) -> a 400 / 429 past the bound.
StoreCheck = Callable[[str, int, "str | None"], Awaitable[None]]
# The chunks (`CHUNK_BYTES` each) a download reads from the store at a time: it holds these, not the file.
_READ_CHUNKS = 8
_SWEEP_EVERY_S = 60.0


async def _no_check(project: str, adding: int, param: str | None) -> None:
    return None


class FileService:
    """Files over the store: made, found (the caller's own, live), listed, read and deleted."""

    def __init__(self, store: ResponseStore, check: StoreCheck = _no_check) -> None:
        self.store = store
        self.check = check
        self._swept = 0.0

    async def sweep(self, now: float | None = None) -> None:
        """Expired files and uploads dropped, at most once a minute unless `now` is given."""
        at = time.time() if now is None else now
        if now is None and at - self._swept < _SWEEP_EVERY_S:
            return
        self._swept = at
        await self.store.sweep_files(at)

    async def create(
        self, project: str, filename: str, purpose: str, data: bytes, expires_s: float | None = None
    ) -> StoredFile:
        """A new file of `project`'s holding `data` (a 400 / 429 past the project's stored bytes first)."""
        await self.check(project, len(data), "file")
        await self.sweep()
        now = time.time()
        file = StoredFile(
            id=new_file_id(),
            project=project,
            filename=filename,
            purpose=purpose,
            bytes=len(data),
            created_at=now,
            expires_at=now + expires_s if expires_s is not None else None,
        )
        await self.store.add_file(file, data)
        return file

    async def get(self, file_id: str, project: str, param: str | None = "file_id") -> StoredFile:
        """`project`'s live file `file_id`; a 404 naming `param` when it is unknown, another project's or
        expired (an expired one is deleted on the way)."""
        file = await self.store.get_file(file_id) if is_file_id(file_id) else None
        if file is not None and file.expires_at is not None and file.expires_at <= time.time():
            logger.info("file %s expired", file.id)
            await self.store.delete_file(file.id)
            file = None
        if file is None or file.project != project:
            raise NotFound(f"No such File object: {file_id}.", param=param)
        return file

    async def get_all(self, file_ids: list[str], project: str, param: str) -> list[StoredFile]:
        """`project`'s live files `file_ids`, in order; a 404 naming `param[i]` for the first that is not."""
        return [await self.get(file_id, project, f"{param}[{i}]") for i, file_id in enumerate(file_ids)]

    async def page(
        self, project: str, *, purpose: str | None, after: str | None, limit: int, descending: bool
    ) -> tuple[list[StoredFile], bool]:
        """A page of `project`'s live files (of `purpose`), and whether more follow it."""
        found = await self.store.list_files(
            project, purpose=purpose, after=after, limit=limit + 1, descending=descending
        )
        return found[:limit], len(found) > limit

    async def chunks(self, file: StoredFile) -> AsyncIterator[bytes]:
        """The file's bytes, read from the store a few chunks at a time."""
        start = 0
        while True:
            batch = await self.store.read_chunks(file.id, start, _READ_CHUNKS)
            for chunk in batch:
                yield chunk
            if len(batch) < _READ_CHUNKS:
                return
            start += len(batch)

    async def read(self, file: StoredFile) -> bytes:
        """The file's bytes, whole."""
        return b"".join([chunk async for chunk in self.chunks(file)])

    async def delete(self, file_id: str, project: str) -> StoredFile:
        file = await self.get(file_id, project)
        await self.store.delete_file(file.id)
        return file

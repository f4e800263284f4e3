"""The Files API's files and the Uploads API's uploads in this process's memory (`FileStore` for `MemoryStore`)."""

from __future__ import annotations

import time
from dataclasses import replace

from vllm_responses.store.base import StoredFile, StoredUpload, chunked

__all__ = ["MemoryFiles"]

_UPLOAD_KEPT_S = 86400.0  # an upload row is kept this long past its expiry


class MemoryFiles:
    """Files, uploads and the chunks of their bytes (by file or part id), in dictionaries."""

    def __init__(self) -> None:
        self._files: dict[str, StoredFile] = {}
        self._chunks: dict[str, list[bytes]] = {}
        self._uploads: dict[str, StoredUpload] = {}
        self._parts: dict[str, dict[str, int]] = {}  # upload id -> part id -> bytes

    def _file_bytes(self, project: str) -> int:
        """The bytes of `project`'s files and of its pending uploads' parts."""
        files = sum(f.bytes for f in self._files.values() if f.project == project)
        parts = sum(
            sum(self._parts.get(u.id, {}).values()) for u in self._uploads.values() if u.project == project
        )
        return files + parts

    async def add_file(self, file: StoredFile, data: bytes) -> None:
        self._files[file.id] = file
        self._chunks[file.id] = chunked(data)

    async def get_file(self, file_id: str) -> StoredFile | None:
        return self._files.get(file_id)

    async def list_files(
        self,
        project: str,
        *,
        purpose: str | None = None,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = True,
    ) -> list[StoredFile]:
        now = time.time()
        mine = [
            f
            for f in self._files.values()
            if f.project == project
            and (purpose is None or f.purpose == purpose)
            and (f.expires_at is None or f.expires_at > now)
        ]
        mine.sort(key=lambda f: (f.created_at, f.id), reverse=descending)
        if after is not None:
            ids = [f.id for f in mine]
            mine = mine[ids.index(after) + 1 :] if after in ids else []
        return mine if limit is None else mine[:limit]

    async def read_chunks(self, owner_id: str, start: int, count: int) -> list[bytes]:
        return self._chunks.get(owner_id, [])[start : start + count]

    async def delete_file(self, file_id: str) -> bool:
        self._chunks.pop(file_id, None)
        return self._files.pop(file_id, None) is not None

    async def add_upload(self, upload: StoredUpload) -> None:
        self._uploads[upload.id] = upload
        self._parts[upload.id] = {}

    async def get_upload(self, upload_id: str) -> StoredUpload | None:
        return self._uploads.get(upload_id)

    async def add_upload_part(self, upload_id: str, part_id: str, created_at: float, data: bytes) -> bool:
        upload = self._uploads.get(upload_id)
        if upload is None or upload.status != "pending":
            return False
        self._parts[upload_id][part_id] = len(data)
        self._chunks[part_id] = chunked(data)
        return True

    async def upload_parts(self, upload_id: str) -> dict[str, int]:
        return dict(self._parts.get(upload_id, {}))

    def _drop_parts(self, upload_id: str) -> None:
        for part_id in self._parts.pop(upload_id, {}):
            self._chunks.pop(part_id, None)

    async def complete_upload(self, upload_id: str, part_ids: list[str], file: StoredFile) -> bool:
        upload = self._uploads.get(upload_id)
        if upload is None or upload.status != "pending":
            return False
        self._files[file.id] = file
        self._chunks[file.id] = [c for part_id in part_ids for c in self._chunks.pop(part_id, [])]
        self._drop_parts(upload_id)
        self._uploads[upload_id] = replace(upload, status="completed", file_id=file.id)
        return True

    async def cancel_upload(self, upload_id: str) -> bool:
        upload = self._uploads.get(upload_id)
        if upload is None or upload.status != "pending":
            return False
        self._drop_parts(upload_id)
        self._uploads[upload_id] = replace(upload, status="cancelled")
        return True

    async def sweep_files(self, now: float) -> None:
        for file in [f for f in self._files.values() if f.expires_at is not None and f.expires_at <= now]:
            await self.delete_file(file.id)
        for upload in list(self._uploads.values()):
            if upload.status == "pending" and upload.expires_at <= now:
                self._drop_parts(upload.id)
                self._uploads[upload.id] = replace(upload, status="expired")
            if upload.expires_at + _UPLOAD_KEPT_S <= now:
                self._drop_parts(upload.id)
                del self._uploads[upload.id]

"""`UploadService`: the Uploads API, a large file sent in parts and made a file of the Files API on completion.

An upload declares its file's size (`bytes`, at most `--max-file-bytes`) and expires an hour after it is made
(`UPLOAD_EXPIRES_S`), its parts dropped. Each part (at most `PART_MOST_BYTES`, and within `--max-upload-bytes`)
is kept in the store as it arrives, checked against the declared size and the project's stored bytes;
completing it names the parts in order, which must sum to the declared size (and match `md5` when given). The
parts' bytes become the file's in the store without being copied. An upload is its project's, as a file is.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.files import UPLOAD_EXPIRES_S, CompleteUpload, CreateUpload, new_file_id
from vllm_responses.protocol.ids import is_id, new_id
from vllm_responses.store.base import StoredFile, StoredUpload
from vllm_responses.tools.files import FileService

__all__ = ["UploadService", "shown"]


def shown(upload: StoredUpload, now: float | None = None) -> StoredUpload:
    """The upload as the client sees it: one still pending past its expiry is `expired`."""
    at = time.time() if now is None else now
    if upload.status == "pending" and upload.expires_at <= at:
        return replace(upload, status="expired")
    return upload


class UploadService:
    """Uploads over the store, their files made through `files` (`max_file_bytes`: the most one may declare)."""

    def __init__(self, files: FileService, max_file_bytes: int) -> None:
        self.files = files
        self.store = files.store
        self.max_file_bytes = max_file_bytes

    async def create(
        self, project: str, req: CreateUpload, purpose: str, expires_s: float | None
    ) -> StoredUpload:
        """A pending upload of `project`'s (`expires_s`: the `expires_after` its file will get)."""
        if req.bytes > self.max_file_bytes:
            raise InvalidRequest(
                f"The upload declares {req.bytes} bytes, more than this server's limit of {self.max_file_bytes} "
                "bytes for one file (--max-file-bytes).",
                param="bytes",
                code="file_too_large",
            )
        await self.files.check(project, req.bytes, "bytes")
        await self.files.sweep()
        now = time.time()
        upload = StoredUpload(
            id=new_id("upload"),
            project=project,
            filename=req.filename,
            purpose=purpose,
            mime_type=req.mime_type,
            bytes=req.bytes,
            created_at=now,
            expires_at=now + UPLOAD_EXPIRES_S,
            file_expires_s=expires_s,
        )
        await self.store.add_upload(upload)
        return upload

    async def get(self, upload_id: str, project: str) -> StoredUpload:
        """`project`'s upload `upload_id` as shown (`shown`); a 404 naming `upload_id` otherwise."""
        upload = await self.store.get_upload(upload_id) if is_id(upload_id, "upload") else None
        if upload is None or upload.project != project:
            raise NotFound(f"No such Upload object: {upload_id}.", param="upload_id")
        return shown(upload)

    async def _pending(self, upload_id: str, project: str) -> StoredUpload:
        upload = await self.get(upload_id, project)
        if upload.status != "pending":
            raise InvalidRequest(
                f"Upload {upload_id} is {upload.status}: it takes no more parts and cannot be completed "
                "or cancelled.",
                param="upload_id",
            )
        return upload

    async def add_part(self, upload_id: str, project: str, data: bytes) -> tuple[str, float]:
        """A part of the pending upload kept: its id and creation time. A 400 naming `data` when it would
        take the parts past the upload's declared size."""
        upload = await self._pending(upload_id, project)
        held = sum((await self.store.upload_parts(upload.id)).values())
        if held + len(data) > upload.bytes:
            raise InvalidRequest(
                f"This part would take the upload to {held + len(data)} bytes, past the {upload.bytes} it "
                "declared.",
                param="data",
            )
        await self.files.check(project, len(data), "data")
        part_id, now = new_id("part"), time.time()
        if not await self.store.add_upload_part(upload.id, part_id, now, data):
            await self._pending(upload_id, project)  # completed, cancelled or expired meanwhile: why
        return part_id, now

    async def complete(self, upload_id: str, project: str, req: CompleteUpload) -> StoredUpload:
        """The upload completed: its file made of the parts `req.part_ids` in that order."""
        upload = await self._pending(upload_id, project)
        parts = await self.store.upload_parts(upload.id)
        for i, part_id in enumerate(req.part_ids):
            if part_id not in parts:
                raise InvalidRequest(f"No part {part_id!r} in upload {upload_id}.", param=f"part_ids[{i}]")
        if len(set(req.part_ids)) != len(req.part_ids):
            raise InvalidRequest("part_ids names a part more than once.", param="part_ids")
        total = sum(parts[p] for p in req.part_ids)
        if total != upload.bytes:
            raise InvalidRequest(
                f"The parts named hold {total} bytes, but the upload declared {upload.bytes}.",
                param="part_ids",
            )
        if req.md5 is not None and req.md5.lower() != await self._md5(req.part_ids):
            raise InvalidRequest("The md5 given does not match the bytes uploaded.", param="md5")
        now = time.time()
        file = StoredFile(
            id=new_file_id(),
            project=project,
            filename=upload.filename,
            purpose=upload.purpose,
            bytes=total,
            created_at=now,
            expires_at=now + upload.file_expires_s if upload.file_expires_s is not None else None,
        )
        if not await self.store.complete_upload(upload.id, list(req.part_ids), file):
            await self._pending(upload_id, project)  # completed, cancelled or expired meanwhile: why
        return replace(upload, status="completed", file_id=file.id)

    async def _md5(self, part_ids: list[str]) -> str:
        digest = hashlib.md5(usedforsecurity=False)
        for part_id in part_ids:
            start = 0
            while batch := await self.store.read_chunks(part_id, start, 8):
                for chunk in batch:
                    digest.update(chunk)
                start += len(batch)
        return digest.hexdigest()

    async def cancel(self, upload_id: str, project: str) -> StoredUpload:
        upload = await self._pending(upload_id, project)
        if not await self.store.cancel_upload(upload.id):
            await self._pending(upload_id, project)
        return replace(upload, status="cancelled")

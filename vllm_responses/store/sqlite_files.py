"""The Files API's files and the Uploads API's uploads in SQLite (`FileStore` for `SQLiteStore`): a row each,
their bytes in `file_chunks` rows keyed by the file's or the part's id."""

from __future__ import annotations

import time
from typing import Any

import aiosqlite

from vllm_responses.store.base import StoredFile, StoredUpload, chunked

__all__ = ["SQLiteFiles"]

_FILE_COLUMNS = "id, project, filename, purpose, bytes, created_at, expires_at"
_UPLOAD_COLUMNS = "id, project, filename, purpose, mime_type, bytes, created_at, expires_at, status, file_id, file_expires_s"
_UPLOAD_KEPT_S = 86400.0  # an upload row is kept this long past its expiry


class SQLiteFiles:
    """`FileStore` over the store's connection (`db`, the store's own). Each method is one transaction."""

    @property
    def db(self) -> aiosqlite.Connection:
        raise NotImplementedError

    async def _file_bytes_sql(self, project: str) -> int:
        async with self.db.execute(
            "SELECT (SELECT coalesce(sum(bytes), 0) FROM files WHERE project = ?) + "
            "(SELECT coalesce(sum(bytes), 0) FROM upload_parts WHERE project = ?)",
            (project, project),
        ) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def _put_chunks(self, owner_id: str, data: bytes) -> None:
        await self.db.executemany(
            "INSERT OR REPLACE INTO file_chunks (owner_id, seq, data) VALUES (?, ?, ?)",
            [(owner_id, seq, chunk) for seq, chunk in enumerate(chunked(data))],
        )

    async def add_file(self, file: StoredFile, data: bytes) -> None:
        await self._insert_file(file)
        await self._put_chunks(file.id, data)
        await self.db.commit()

    async def _insert_file(self, file: StoredFile) -> None:
        await self.db.execute(
            f"INSERT OR REPLACE INTO files ({_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                file.id,
                file.project,
                file.filename,
                file.purpose,
                file.bytes,
                file.created_at,
                file.expires_at,
            ),
        )

    async def get_file(self, file_id: str) -> StoredFile | None:
        async with self.db.execute(f"SELECT {_FILE_COLUMNS} FROM files WHERE id = ?", (file_id,)) as cur:
            row = await cur.fetchone()
        return None if row is None else StoredFile(*row)

    async def list_files(
        self,
        project: str,
        *,
        purpose: str | None = None,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = True,
    ) -> list[StoredFile]:
        sql = (
            f"SELECT {_FILE_COLUMNS} FROM files WHERE project = ? AND (expires_at IS NULL OR expires_at > ?)"
        )
        args: list[Any] = [project, time.time()]
        if purpose is not None:
            sql += " AND purpose = ?"
            args.append(purpose)
        if after is not None:  # an unknown `after` compares with NULL: no rows
            sql += (
                f" AND (created_at, id) {'<' if descending else '>'} "
                "(SELECT created_at, id FROM files WHERE id = ? AND project = ?)"
            )
            args += [after, project]
        way = "DESC" if descending else "ASC"
        sql += f" ORDER BY created_at {way}, id {way} LIMIT ?"
        args.append(-1 if limit is None else limit)
        async with self.db.execute(sql, args) as cur:
            return [StoredFile(*row) for row in await cur.fetchall()]

    async def read_chunks(self, owner_id: str, start: int, count: int) -> list[bytes]:
        async with self.db.execute(
            "SELECT data FROM file_chunks WHERE owner_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
            (owner_id, start, count),
        ) as cur:
            return [bytes(row[0]) for row in await cur.fetchall()]

    async def delete_file(self, file_id: str) -> bool:
        cur = await self.db.execute("DELETE FROM files WHERE id = ?", (file_id,))
        await self.db.execute("DELETE FROM file_chunks WHERE owner_id = ?", (file_id,))
        await self.db.commit()
        return cur.rowcount > 0

    async def add_upload(self, upload: StoredUpload) -> None:
        await self.db.execute(
            f"INSERT OR REPLACE INTO uploads ({_UPLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                upload.id,
                upload.project,
                upload.filename,
                upload.purpose,
                upload.mime_type,
                upload.bytes,
                upload.created_at,
                upload.expires_at,
                upload.status,
                upload.file_id,
                upload.file_expires_s,
            ),
        )
        await self.db.commit()

    async def get_upload(self, upload_id: str) -> StoredUpload | None:
        async with self.db.execute(
            f"SELECT {_UPLOAD_COLUMNS} FROM uploads WHERE id = ?", (upload_id,)
        ) as cur:
            row = await cur.fetchone()
        return None if row is None else StoredUpload(*row)

    async def add_upload_part(self, upload_id: str, part_id: str, created_at: float, data: bytes) -> bool:
        try:  # the upload's status read and the part written in one transaction (begun by the first write)
            cur = await self.db.execute(
                "INSERT INTO upload_parts (id, upload_id, project, bytes, created_at) "
                "SELECT ?, id, project, ?, ? FROM uploads WHERE id = ? AND status = 'pending'",
                (part_id, len(data), created_at, upload_id),
            )
            if cur.rowcount > 0:
                await self._put_chunks(part_id, data)
            await self.db.commit()
        except BaseException:
            await self.db.rollback()
            raise
        return cur.rowcount > 0

    async def upload_parts(self, upload_id: str) -> dict[str, int]:
        async with self.db.execute(
            "SELECT id, bytes FROM upload_parts WHERE upload_id = ? ORDER BY created_at, id", (upload_id,)
        ) as cur:
            return {row[0]: int(row[1]) for row in await cur.fetchall()}

    async def _drop_parts(self, upload_id: str) -> None:
        await self.db.execute(
            "DELETE FROM file_chunks WHERE owner_id IN (SELECT id FROM upload_parts WHERE upload_id = ?)",
            (upload_id,),
        )
        await self.db.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))

    async def complete_upload(self, upload_id: str, part_ids: list[str], file: StoredFile) -> bool:
        try:
            cur = await self.db.execute(
                "UPDATE uploads SET status = 'completed', file_id = ? WHERE id = ? AND status = 'pending'",
                (file.id, upload_id),
            )
            if cur.rowcount > 0:
                await self._insert_file(file)
                offset = 0
                for part_id in part_ids:  # each part's chunks handed to the file, after the parts before it
                    moved = await self.db.execute(
                        "UPDATE file_chunks SET owner_id = ?, seq = seq + ? WHERE owner_id = ?",
                        (file.id, offset, part_id),
                    )
                    offset += moved.rowcount
                await self._drop_parts(upload_id)
            await self.db.commit()
        except BaseException:
            await self.db.rollback()
            raise
        return cur.rowcount > 0

    async def cancel_upload(self, upload_id: str) -> bool:
        cur = await self.db.execute(
            "UPDATE uploads SET status = 'cancelled' WHERE id = ? AND status = 'pending'", (upload_id,)
        )
        if cur.rowcount > 0:
            await self._drop_parts(upload_id)
        await self.db.commit()
        return cur.rowcount > 0

    async def sweep_files(self, now: float) -> None:
        await self.db.execute(
            "DELETE FROM file_chunks WHERE owner_id IN (SELECT id FROM files WHERE expires_at <= ?)", (now,)
        )
        await self.db.execute("DELETE FROM files WHERE expires_at <= ?", (now,))
        async with self.db.execute(
            "SELECT id FROM uploads WHERE expires_at <= ? AND status = 'pending'", (now,)
        ) as cur:
            expired = [row[0] for row in await cur.fetchall()]
        for upload_id in expired:
            await self._drop_parts(upload_id)
        await self.db.execute(
            "UPDATE uploads SET status = 'expired' WHERE expires_at <= ? AND status = 'pending'", (now,)
        )
        await self.db.execute("DELETE FROM uploads WHERE expires_at <= ?", (now - _UPLOAD_KEPT_S,))
        await self.db.commit()

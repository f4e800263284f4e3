"""The Files API's files and the Uploads API's uploads in Postgres (`FileStore` for `PostgresStore`): a row each,
their bytes in `file_chunks` rows keyed by the file's or the part's id."""

from __future__ import annotations

import time
from typing import Any

import asyncpg

from vllm_responses.store.base import StoredFile, StoredUpload, chunked

__all__ = ["PostgresFiles"]

_FILE_COLUMNS = "id, project, filename, purpose, bytes, created_at, expires_at"
_UPLOAD_COLUMNS = "id, project, filename, purpose, mime_type, bytes, created_at, expires_at, status, file_id, file_expires_s"
_UPLOAD_KEPT_S = 86400.0  # an upload row is kept this long past its expiry


def _count(status: str) -> int:
    """The row count of an asyncpg command status ("UPDATE 2", "INSERT 0 1")."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresFiles:
    """`FileStore` over the store's pool (`pool`, the store's own). Each method is one transaction."""

    @property
    def pool(self) -> asyncpg.Pool:
        raise NotImplementedError

    async def _file_bytes_sql(self, project: str) -> int:
        total = await self.pool.fetchval(
            "SELECT (SELECT coalesce(sum(bytes), 0) FROM files WHERE project = $1) + "
            "(SELECT coalesce(sum(bytes), 0) FROM upload_parts WHERE project = $1)",
            project,
        )
        return int(total or 0)

    @staticmethod
    async def _put_chunks(conn: Any, owner_id: str, data: bytes) -> None:
        await conn.executemany(
            "INSERT INTO file_chunks (owner_id, seq, data) VALUES ($1, $2, $3) "
            "ON CONFLICT (owner_id, seq) DO UPDATE SET data = EXCLUDED.data",
            [(owner_id, seq, chunk) for seq, chunk in enumerate(chunked(data))],
        )

    @staticmethod
    async def _insert_file(conn: Any, file: StoredFile) -> None:
        await conn.execute(
            f"INSERT INTO files ({_FILE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
            file.id,
            file.project,
            file.filename,
            file.purpose,
            file.bytes,
            file.created_at,
            file.expires_at,
        )

    async def add_file(self, file: StoredFile, data: bytes) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await self._insert_file(conn, file)
            await self._put_chunks(conn, file.id, data)

    async def get_file(self, file_id: str) -> StoredFile | None:
        row = await self.pool.fetchrow(f"SELECT {_FILE_COLUMNS} FROM files WHERE id = $1", file_id)
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
        sql = f"SELECT {_FILE_COLUMNS} FROM files WHERE project = $1 AND (expires_at IS NULL OR expires_at > $2)"
        args: list[Any] = [project, time.time()]
        if purpose is not None:
            args.append(purpose)
            sql += f" AND purpose = ${len(args)}"
        if after is not None:  # an unknown `after` compares with NULL: no rows
            args.append(after)
            sql += (
                f" AND (created_at, id) {'<' if descending else '>'} "
                f"(SELECT created_at, id FROM files WHERE id = ${len(args)} AND project = $1)"
            )
        way = "DESC" if descending else "ASC"
        args.append(limit)  # NULL: no limit
        sql += f" ORDER BY created_at {way}, id {way} LIMIT ${len(args)}"
        return [StoredFile(*row) for row in await self.pool.fetch(sql, *args)]

    async def read_chunks(self, owner_id: str, start: int, count: int) -> list[bytes]:
        rows = await self.pool.fetch(
            "SELECT data FROM file_chunks WHERE owner_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
            owner_id,
            start,
            count,
        )
        return [bytes(row["data"]) for row in rows]

    async def delete_file(self, file_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM files WHERE id = $1", file_id)
            await conn.execute("DELETE FROM file_chunks WHERE owner_id = $1", file_id)
        return _count(status) > 0

    async def add_upload(self, upload: StoredUpload) -> None:
        await self.pool.execute(
            f"INSERT INTO uploads ({_UPLOAD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
            "ON CONFLICT (id) DO NOTHING",
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
        )

    async def get_upload(self, upload_id: str) -> StoredUpload | None:
        row = await self.pool.fetchrow(f"SELECT {_UPLOAD_COLUMNS} FROM uploads WHERE id = $1", upload_id)
        return None if row is None else StoredUpload(*row)

    async def add_upload_part(self, upload_id: str, part_id: str, created_at: float, data: bytes) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute(  # the upload row locked: a completion waits for this part
                "INSERT INTO upload_parts (id, upload_id, project, bytes, created_at) "
                "SELECT $1, id, project, $2, $3 FROM uploads WHERE id = $4 AND status = 'pending' FOR UPDATE "
                "ON CONFLICT (id) DO NOTHING",
                part_id,
                len(data),
                created_at,
                upload_id,
            )
            added = _count(status) > 0
            if added:
                await self._put_chunks(conn, part_id, data)
        return added

    async def upload_parts(self, upload_id: str) -> dict[str, int]:
        rows = await self.pool.fetch(
            "SELECT id, bytes FROM upload_parts WHERE upload_id = $1 ORDER BY created_at, id", upload_id
        )
        return {row["id"]: int(row["bytes"]) for row in rows}

    @staticmethod
    async def _drop_parts(conn: Any, upload_id: str) -> None:
        await conn.execute(
            "DELETE FROM file_chunks WHERE owner_id IN (SELECT id FROM upload_parts WHERE upload_id = $1)",
            upload_id,
        )
        await conn.execute("DELETE FROM upload_parts WHERE upload_id = $1", upload_id)

    async def complete_upload(self, upload_id: str, part_ids: list[str], file: StoredFile) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute(
                "UPDATE uploads SET status = 'completed', file_id = $1 WHERE id = $2 AND status = 'pending'",
                file.id,
                upload_id,
            )
            if _count(status) == 0:
                return False
            await self._insert_file(conn, file)
            offset = 0
            for part_id in part_ids:  # each part's chunks handed to the file, after the parts before it
                moved = await conn.execute(
                    "UPDATE file_chunks SET owner_id = $1, seq = seq + $2 WHERE owner_id = $3",
                    file.id,
                    offset,
                    part_id,
                )
                offset += _count(moved)
            await self._drop_parts(conn, upload_id)
        return True

    async def cancel_upload(self, upload_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute(
                "UPDATE uploads SET status = 'cancelled' WHERE id = $1 AND status = 'pending'", upload_id
            )
            if _count(status) == 0:
                return False
            await self._drop_parts(conn, upload_id)
        return True

    async def sweep_files(self, now: float) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM file_chunks WHERE owner_id IN (SELECT id FROM files WHERE expires_at <= $1)", now
            )
            await conn.execute("DELETE FROM files WHERE expires_at <= $1", now)
            expired = await conn.fetch(
                "UPDATE uploads SET status = 'expired' WHERE expires_at <= $1 AND status = 'pending' RETURNING id",
                now,
            )
            for row in expired:
                await self._drop_parts(conn, row["id"])
            await conn.execute("DELETE FROM uploads WHERE expires_at <= $1", now - _UPLOAD_KEPT_S)

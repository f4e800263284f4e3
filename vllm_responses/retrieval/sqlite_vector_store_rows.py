"""`SQLiteVectorStoreRows`: the vector stores' rows (`VectorStoreRows`) on the chunk index's SQLite connection, so
that a file's rows and its chunks live in one database; a write is one `BEGIN IMMEDIATE` transaction, so
processes sharing the file claim each file once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import aiosqlite

from vllm_responses.retrieval.attributes import Attributes
from vllm_responses.retrieval.vector_store_records import (
    BATCH_COLUMNS,
    FILE_COLUMNS,
    STORE_COLUMNS,
    BatchRow,
    FileCounts,
    FileRow,
    StoreRow,
    file_row,
    store_row,
)

__all__ = ["SQLiteVectorStoreRows"]


class SQLiteVectorStoreRows:
    """The rows of vector stores, their files and batches (`VectorStoreRows`) over `db` (one statement or
    transaction at a time, under `lock`, the index's own)."""

    def __init__(self, db: aiosqlite.Connection, lock: asyncio.Lock) -> None:
        self.db = db
        self.lock = lock

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self.lock, self.db.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        """`statements` in one transaction; each one's rowcount."""
        async with self.lock:
            await self.db.commit()
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                counts = [(await self.db.execute(sql, params)).rowcount for sql, params in statements]
                await self.db.commit()
            except BaseException:
                await self.db.rollback()
                raise
        return counts

    # vector stores

    async def add_store(self, store: StoreRow) -> None:
        await self._write(
            [
                (
                    f"INSERT INTO vector_stores ({STORE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        store.id,
                        store.project,
                        store.name,
                        store.description,
                        json.dumps(store.metadata),
                        store.created_at,
                        store.last_active_at,
                        store.expires_days,
                        store.expires_at,
                    ),  # fmt: skip
                )
            ]
        )

    async def get_store(self, vector_store_id: str) -> StoreRow | None:
        rows = await self._read(f"SELECT {STORE_COLUMNS} FROM vector_stores WHERE id = ?", (vector_store_id,))
        return store_row(rows[0]) if rows else None

    async def stores(self, project: str) -> list[StoreRow]:
        """`project`'s vector stores, oldest first."""
        rows = await self._read(
            f"SELECT {STORE_COLUMNS} FROM vector_stores WHERE project = ? ORDER BY created_at, id",
            (project,),
        )
        return [store_row(r) for r in rows]

    async def put_store(self, store: StoreRow) -> None:
        """The vector store's name, description, metadata, activity and expiry replaced."""
        await self._write(
            [
                (
                    "UPDATE vector_stores SET name = ?, description = ?, metadata = ?, last_active_at = ?, "
                    "expires_days = ?, expires_at = ? WHERE id = ?",
                    (
                        store.name,
                        store.description,
                        json.dumps(store.metadata),
                        store.last_active_at,
                        store.expires_days,
                        store.expires_at,
                        store.id,
                    ),  # fmt: skip
                )
            ]
        )

    async def touch(self, vector_store_id: str, now: float, expires_at: float | None) -> None:
        """The vector store used at `now` (a search): its `last_active_at` and expiry moved."""
        await self._write(
            [
                (
                    "UPDATE vector_stores SET last_active_at = ?, expires_at = ? WHERE id = ?",
                    (now, expires_at, vector_store_id),
                )
            ]
        )

    async def delete_store(self, vector_store_id: str) -> bool:
        """The vector store's row, its files' rows and its batches' rows deleted (its chunks are the index's)."""
        counts = await self._write(
            [
                ("DELETE FROM vector_stores WHERE id = ?", (vector_store_id,)),
                ("DELETE FROM vector_store_files WHERE vector_store_id = ?", (vector_store_id,)),
                ("DELETE FROM vector_store_file_batches WHERE vector_store_id = ?", (vector_store_id,)),
            ]
        )
        return counts[0] > 0

    async def expired_stores(self, now: float, limit: int) -> list[str]:
        """Up to `limit` vector stores past their `expires_at` at `now` that still hold a file, longest expired
        first."""
        rows = await self._read(
            "SELECT id FROM vector_stores WHERE expires_at <= ? AND EXISTS (SELECT 1 FROM vector_store_files f "
            "WHERE f.vector_store_id = vector_stores.id) ORDER BY expires_at, id LIMIT ?",
            (now, limit),
        )
        return [str(r[0]) for r in rows]

    async def empty_store(self, vector_store_id: str) -> None:
        """The vector store's files' rows and its batches' rows deleted; the vector store stays."""
        await self._write(
            [
                ("DELETE FROM vector_store_files WHERE vector_store_id = ?", (vector_store_id,)),
                ("DELETE FROM vector_store_file_batches WHERE vector_store_id = ?", (vector_store_id,)),
            ]
        )

    async def counts(self, where: str, value: str) -> FileCounts:
        """Files by status of one vector store (`where` "vector_store_id") or one batch ("batch_id")."""
        assert where in ("vector_store_id", "batch_id")
        rows = await self._read(
            f"SELECT status, count(*) FROM vector_store_files WHERE {where} = ? GROUP BY status", (value,)
        )
        return FileCounts(**{str(s): int(n) for s, n in rows if s in FileCounts.__annotations__})

    async def usage_bytes(self, vector_store_id: str) -> int:
        rows = await self._read(
            "SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files WHERE vector_store_id = ?",
            (vector_store_id,),
        )
        return int(rows[0][0])

    async def project_bytes(self, project: str) -> int:
        """What `project`'s vector stores keep (their files' `usage_bytes`)."""
        rows = await self._read(
            "SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files WHERE project = ?", (project,)
        )
        return int(rows[0][0])

    # files

    async def add_files(self, files: Sequence[FileRow], batch: BatchRow | None = None) -> None:
        """The files added (a file already in the vector store is replaced, to be ingested again), with the
        batch that adds them, in one transaction."""
        statements: list[tuple[str, Sequence[Any]]] = []
        if batch is not None:
            statements.append(
                (
                    f"INSERT INTO vector_store_file_batches ({BATCH_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                    (batch.id, batch.vector_store_id, batch.project, batch.status, batch.created_at),
                )
            )
        for f in files:
            statements.append(
                (
                    f"INSERT OR REPLACE INTO vector_store_files ({FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        f.vector_store_id,
                        f.file_id,
                        f.project,
                        f.batch_id,
                        f.status,
                        json.dumps(f.attributes),
                        json.dumps(f.chunking),
                        f.usage_bytes,
                        None,
                        f.created_at,
                    ),  # fmt: skip
                )
            )
        await self._write(statements)

    async def get_file(self, vector_store_id: str, file_id: str) -> FileRow | None:
        rows = await self._read(
            f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = ? AND file_id = ?",
            (vector_store_id, file_id),
        )
        return file_row(rows[0]) if rows else None

    async def files(
        self, vector_store_id: str, *, status: str | None = None, batch_id: str | None = None
    ) -> list[FileRow]:
        """The vector store's files (of `status`, of the batch `batch_id`), oldest first."""
        sql = f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = ?"
        params: list[Any] = [vector_store_id]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        if batch_id is not None:
            sql += " AND batch_id = ?"
            params.append(batch_id)
        rows = await self._read(sql + " ORDER BY created_at, file_id", params)
        return [file_row(r) for r in rows]

    async def holding(self, file_id: str) -> list[FileRow]:
        """Every vector store's row of the Files API file `file_id`."""
        rows = await self._read(
            f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE file_id = ? ORDER BY vector_store_id",
            (file_id,),
        )
        return [file_row(r) for r in rows]

    async def file_ids(self, after: str, limit: int) -> list[str]:
        """Up to `limit` of the Files API files some vector store holds, in order of their ids after `after`."""
        rows = await self._read(
            "SELECT DISTINCT file_id FROM vector_store_files WHERE file_id > ? ORDER BY file_id LIMIT ?",
            (after, limit),
        )
        return [str(r[0]) for r in rows]

    async def content(self, vector_store_id: str, file_id: str) -> list[str] | None:
        """The file's parsed text in its parts, as its ingestion kept it (None: not kept, or not ingested)."""
        rows = await self._read(
            "SELECT content FROM vector_store_files WHERE vector_store_id = ? AND file_id = ?",
            (vector_store_id, file_id),
        )
        return None if not rows or rows[0][0] is None else [str(p) for p in json.loads(rows[0][0])]

    async def set_file_attributes(self, vector_store_id: str, file_id: str, attributes: Attributes) -> bool:
        (count,) = await self._write(
            [
                (
                    "UPDATE vector_store_files SET attributes = ? WHERE vector_store_id = ? AND file_id = ?",
                    (json.dumps(attributes), vector_store_id, file_id),
                )
            ]
        )
        return count > 0

    async def delete_file(self, vector_store_id: str, file_id: str) -> bool:
        (count,) = await self._write(
            [
                (
                    "DELETE FROM vector_store_files WHERE vector_store_id = ? AND file_id = ?",
                    (vector_store_id, file_id),
                )
            ]
        )
        return count > 0

    # ingestion

    async def claim(self, owner: str, now: float, lease_s: float, limit: int) -> list[FileRow]:
        """Up to `limit` files `in_progress` with no live lease (none, expired, or `owner`'s own from a life
        before this one), now leased to `owner` until `now + lease_s`; oldest first."""
        free = "status = 'in_progress' AND (lease_owner IS NULL OR lease_expires_at <= ?)"
        if not await self._read(f"SELECT 1 FROM vector_store_files WHERE {free} LIMIT 1", (now,)):
            return []  # nothing to claim: no write (the heartbeat looks every few seconds)
        async with self.lock:
            await self.db.commit()
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                async with self.db.execute(
                    f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE {free} "
                    "ORDER BY created_at, file_id LIMIT ?",
                    (now, limit),
                ) as cur:
                    found = [file_row(r) for r in await cur.fetchall()]
                for f in found:
                    await self.db.execute(
                        "UPDATE vector_store_files SET lease_owner = ?, lease_expires_at = ? "
                        "WHERE vector_store_id = ? AND file_id = ?",
                        (owner, now + lease_s, f.vector_store_id, f.file_id),
                    )
                await self.db.commit()
            except BaseException:
                await self.db.rollback()
                raise
        return found

    async def release_own(self, owner: str) -> None:
        """`owner`'s leases dropped (its previous life's, at start: its files are free to claim at once)."""
        await self._write(
            [
                (
                    "UPDATE vector_store_files SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = ?",
                    (owner,),
                )
            ]
        )

    async def renew(self, owner: str, until: float) -> None:
        await self._write(
            [
                (
                    "UPDATE vector_store_files SET lease_expires_at = ? WHERE lease_owner = ? AND "
                    "status = 'in_progress'",
                    (until, owner),
                )
            ]
        )

    async def finish(
        self,
        file: FileRow,
        owner: str,
        status: str,
        usage_bytes: int = 0,
        error: dict[str, str] | None = None,
        content: Sequence[str] | None = None,
    ) -> bool:
        """The file, still `in_progress` under `owner`'s lease, marked `status` (with its parsed text in parts,
        `content`); False when it is not (cancelled, removed or taken up again meanwhile)."""
        (count,) = await self._write(
            [
                (
                    "UPDATE vector_store_files SET status = ?, usage_bytes = ?, last_error = ?, content = ?, "
                    "lease_owner = NULL, lease_expires_at = NULL WHERE vector_store_id = ? AND file_id = ? "
                    "AND status = 'in_progress' AND lease_owner = ? AND created_at = ?",
                    (
                        status,
                        usage_bytes,
                        None if error is None else json.dumps(error),
                        None if content is None else json.dumps(list(content)),
                        file.vector_store_id,
                        file.file_id,
                        owner,
                        file.created_at,
                    ),  # fmt: skip
                )
            ]
        )
        return count > 0

    # batches

    async def get_batch(self, batch_id: str) -> BatchRow | None:
        rows = await self._read(
            f"SELECT {BATCH_COLUMNS} FROM vector_store_file_batches WHERE id = ?", (batch_id,)
        )
        return BatchRow(*rows[0]) if rows else None

    async def cancel_batch(self, batch_id: str) -> bool:
        """The batch marked cancelled, and its files still in progress; False when it was not in progress."""
        counts = await self._write(
            [
                (
                    "UPDATE vector_store_file_batches SET status = 'cancelled' WHERE id = ? AND status = 'in_progress'",
                    (batch_id,),
                ),
                (
                    "UPDATE vector_store_files SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL "
                    "WHERE batch_id = ? AND status = 'in_progress'",
                    (batch_id,),
                ),
            ]
        )
        return counts[0] > 0

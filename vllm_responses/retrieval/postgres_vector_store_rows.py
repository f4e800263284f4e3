"""`PostgresVectorStoreRows`: the vector stores' rows (`VectorStoreRows`) in the chunk index's Postgres database, on
its pool, so that every replica sharing the database serves the same vector stores and any of them ingests a file.
A claim takes its files with `FOR UPDATE SKIP LOCKED`: replicas claiming at once never take the same file, nor
wait on each other. Each method is one statement or transaction, retried once on a lost connection (a 503
`store_unavailable` when it fails again)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncpg

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
from vllm_responses.store.retry import retry_on_disconnect

__all__ = ["PostgresVectorStoreRows"]

_FILE_IN = ", ".join(f"f.{c.strip()}" for c in FILE_COLUMNS.split(","))
_ADD_FILE = (
    f"INSERT INTO vector_store_files ({FILE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, $9) "
    "ON CONFLICT (vector_store_id, file_id) DO UPDATE SET project = excluded.project, "
    "batch_id = excluded.batch_id, status = excluded.status, attributes = excluded.attributes, "
    "chunking = excluded.chunking, usage_bytes = excluded.usage_bytes, last_error = NULL, "
    "created_at = excluded.created_at, lease_owner = NULL, lease_expires_at = NULL"
)
_CLAIM = (
    "UPDATE vector_store_files f SET lease_owner = $1, lease_expires_at = $3 FROM ("
    "SELECT vector_store_id, file_id FROM vector_store_files WHERE status = 'in_progress' "
    "AND (lease_owner IS NULL OR lease_expires_at <= $2) ORDER BY created_at, file_id LIMIT $4 "
    "FOR UPDATE SKIP LOCKED) AS free "
    f"WHERE f.vector_store_id = free.vector_store_id AND f.file_id = free.file_id RETURNING {_FILE_IN}"
)


def _affected(status: str) -> int:
    """The row count of an asyncpg command status ("DELETE 1", "UPDATE 0", "INSERT 0 1")."""
    return int(status.rsplit(" ", 1)[-1])


@retry_on_disconnect
class PostgresVectorStoreRows:
    """The rows of vector stores, their files and batches (`VectorStoreRows`) over `pool` (the chunk index's)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool  # the name retry.py expires connections through

    async def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        """`statements` in one transaction; each one's row count."""
        async with self._pool.acquire() as conn, conn.transaction():
            return [_affected(await conn.execute(sql, *params)) for sql, params in statements]

    # vector stores

    async def add_store(self, store: StoreRow) -> None:
        await self._pool.execute(
            f"INSERT INTO vector_stores ({STORE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            store.id,
            store.project,
            store.name,
            store.description,
            json.dumps(store.metadata),
            store.created_at,
            store.last_active_at,
            store.expires_days,
            store.expires_at,
        )

    async def get_store(self, vector_store_id: str) -> StoreRow | None:
        row = await self._pool.fetchrow(
            f"SELECT {STORE_COLUMNS} FROM vector_stores WHERE id = $1", vector_store_id
        )
        return None if row is None else store_row(row)

    async def stores(self, project: str) -> list[StoreRow]:
        rows = await self._pool.fetch(
            f"SELECT {STORE_COLUMNS} FROM vector_stores WHERE project = $1 ORDER BY created_at, id", project
        )
        return [store_row(r) for r in rows]

    async def put_store(self, store: StoreRow) -> None:
        await self._pool.execute(
            "UPDATE vector_stores SET name = $1, description = $2, metadata = $3, last_active_at = $4, "
            "expires_days = $5, expires_at = $6 WHERE id = $7",
            store.name,
            store.description,
            json.dumps(store.metadata),
            store.last_active_at,
            store.expires_days,
            store.expires_at,
            store.id,
        )

    async def touch(self, vector_store_id: str, now: float, expires_at: float | None) -> None:
        await self._pool.execute(
            "UPDATE vector_stores SET last_active_at = $1, expires_at = $2 WHERE id = $3",
            now,
            expires_at,
            vector_store_id,
        )

    async def delete_store(self, vector_store_id: str) -> bool:
        counts = await self._write(
            [
                ("DELETE FROM vector_stores WHERE id = $1", (vector_store_id,)),
                ("DELETE FROM vector_store_files WHERE vector_store_id = $1", (vector_store_id,)),
                ("DELETE FROM vector_store_file_batches WHERE vector_store_id = $1", (vector_store_id,)),
            ]
        )
        return counts[0] > 0

    async def expired_stores(self, now: float, limit: int) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT id FROM vector_stores WHERE expires_at <= $1 AND EXISTS (SELECT 1 FROM vector_store_files f "
            "WHERE f.vector_store_id = vector_stores.id) ORDER BY expires_at, id LIMIT $2",
            now,
            limit,
        )
        return [str(r[0]) for r in rows]

    async def empty_store(self, vector_store_id: str) -> None:
        await self._write(
            [
                ("DELETE FROM vector_store_files WHERE vector_store_id = $1", (vector_store_id,)),
                ("DELETE FROM vector_store_file_batches WHERE vector_store_id = $1", (vector_store_id,)),
            ]
        )

    async def counts(self, where: str, value: str) -> FileCounts:
        assert where in ("vector_store_id", "batch_id")
        rows = await self._pool.fetch(
            f"SELECT status, count(*) FROM vector_store_files WHERE {where} = $1 GROUP BY status", value
        )
        return FileCounts(**{str(s): int(n) for s, n in rows if s in FileCounts.__annotations__})

    async def usage_bytes(self, vector_store_id: str) -> int:
        total = await self._pool.fetchval(
            "SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files WHERE vector_store_id = $1",
            vector_store_id,
        )
        return int(total)

    async def project_bytes(self, project: str) -> int:
        total = await self._pool.fetchval(
            "SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files WHERE project = $1", project
        )
        return int(total)

    # files

    async def add_files(self, files: Sequence[FileRow], batch: BatchRow | None = None) -> None:
        statements: list[tuple[str, Sequence[Any]]] = []
        if batch is not None:
            statements.append(
                (
                    f"INSERT INTO vector_store_file_batches ({BATCH_COLUMNS}) VALUES ($1, $2, $3, $4, $5)",
                    (batch.id, batch.vector_store_id, batch.project, batch.status, batch.created_at),
                )
            )
        for f in files:
            statements.append(
                (
                    _ADD_FILE,
                    (
                        f.vector_store_id,
                        f.file_id,
                        f.project,
                        f.batch_id,
                        f.status,
                        json.dumps(f.attributes),
                        json.dumps(f.chunking),
                        f.usage_bytes,
                        f.created_at,
                    ),  # fmt: skip
                )
            )
        await self._write(statements)

    async def get_file(self, vector_store_id: str, file_id: str) -> FileRow | None:
        row = await self._pool.fetchrow(
            f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = $1 AND file_id = $2",
            vector_store_id,
            file_id,
        )
        return None if row is None else file_row(row)

    async def files(
        self, vector_store_id: str, *, status: str | None = None, batch_id: str | None = None
    ) -> list[FileRow]:
        rows = await self._pool.fetch(
            f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = $1 "
            "AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR batch_id = $3) "
            "ORDER BY created_at, file_id",
            vector_store_id,
            status,
            batch_id,
        )
        return [file_row(r) for r in rows]

    async def holding(self, file_id: str) -> list[FileRow]:
        rows = await self._pool.fetch(
            f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE file_id = $1 ORDER BY vector_store_id",
            file_id,
        )
        return [file_row(r) for r in rows]

    async def file_ids(self, after: str, limit: int) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT DISTINCT file_id FROM vector_store_files WHERE file_id > $1 ORDER BY file_id LIMIT $2",
            after,
            limit,
        )
        return [str(r[0]) for r in rows]

    async def content(self, vector_store_id: str, file_id: str) -> list[str] | None:
        kept = await self._pool.fetchval(
            "SELECT content FROM vector_store_files WHERE vector_store_id = $1 AND file_id = $2",
            vector_store_id,
            file_id,
        )
        return None if kept is None else [str(p) for p in json.loads(kept)]

    async def set_file_attributes(self, vector_store_id: str, file_id: str, attributes: Attributes) -> bool:
        status = await self._pool.execute(
            "UPDATE vector_store_files SET attributes = $1 WHERE vector_store_id = $2 AND file_id = $3",
            json.dumps(attributes),
            vector_store_id,
            file_id,
        )
        return _affected(status) > 0

    async def delete_file(self, vector_store_id: str, file_id: str) -> bool:
        status = await self._pool.execute(
            "DELETE FROM vector_store_files WHERE vector_store_id = $1 AND file_id = $2",
            vector_store_id,
            file_id,
        )
        return _affected(status) > 0

    # ingestion

    async def claim(self, owner: str, now: float, lease_s: float, limit: int) -> list[FileRow]:
        rows = await self._pool.fetch(_CLAIM, owner, now, now + lease_s, limit)
        return sorted((file_row(r) for r in rows), key=lambda f: (f.created_at, f.file_id))

    async def release_own(self, owner: str) -> None:
        await self._pool.execute(
            "UPDATE vector_store_files SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = $1",
            owner,
        )

    async def renew(self, owner: str, until: float) -> None:
        await self._pool.execute(
            "UPDATE vector_store_files SET lease_expires_at = $1 WHERE lease_owner = $2 AND status = 'in_progress'",
            until,
            owner,
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
        done = await self._pool.execute(
            "UPDATE vector_store_files SET status = $1, usage_bytes = $2, last_error = $3, content = $8, "
            "lease_owner = NULL, lease_expires_at = NULL WHERE vector_store_id = $4 AND file_id = $5 "
            "AND status = 'in_progress' AND lease_owner = $6 AND created_at = $7",
            status,
            usage_bytes,
            None if error is None else json.dumps(error),
            file.vector_store_id,
            file.file_id,
            owner,
            file.created_at,
            None if content is None else json.dumps(list(content)),
        )
        return _affected(done) > 0

    # batches

    async def get_batch(self, batch_id: str) -> BatchRow | None:
        row = await self._pool.fetchrow(
            f"SELECT {BATCH_COLUMNS} FROM vector_store_file_batches WHERE id = $1", batch_id
        )
        return None if row is None else BatchRow(*row)

    async def cancel_batch(self, batch_id: str) -> bool:
        counts = await self._write(
            [
                (
                    "UPDATE vector_store_file_batches SET status = 'cancelled' WHERE id = $1 "
                    "AND status = 'in_progress'",
                    (batch_id,),
                ),
                (
                    "UPDATE vector_store_files SET status = 'cancelled', lease_owner = NULL, "
                    "lease_expires_at = NULL WHERE batch_id = $1 AND status = 'in_progress'",
                    (batch_id,),
                ),
            ]
        )
        return counts[0] > 0

"""The `ResponseStore` in Postgres (asyncpg, a bounded pool): what lets several replicas share responses."""

from __future__ import annotations

import json
import time
from typing import Any

import asyncpg

from vllm_responses.store.base import StoredResponse, own_items
from vllm_responses.store.conversations_pg import PostgresConversations, affected
from vllm_responses.store.events_pg import PostgresEvents
from vllm_responses.store.leases import PostgresLeases
from vllm_responses.store.migrations import upgrade_postgres
from vllm_responses.store.notify import LocalNotices, PostgresNotices
from vllm_responses.store.retry import retry_on_disconnect

__all__ = ["PostgresStore"]

_COLUMNS = "id, created_at, include_outputs, response, input_items, history"


def _record(row: Any) -> StoredResponse:
    return StoredResponse(
        id=row["id"],
        created_at=row["created_at"],
        include_outputs=row["include_outputs"],
        response=json.loads(row["response"]),
        input_items=json.loads(row["input_items"]),
        history=json.loads(row["history"]),
    )


@retry_on_disconnect  # a lost connection: retried once, then a 503 (store_retry.py)
class PostgresStore(PostgresConversations, PostgresLeases, PostgresEvents):
    """Postgres through an asyncpg pool; the same tables, semantics and bounds as `SQLiteStore`.

    Parameters
    ----------
    url: a libpq URL, `postgresql://user:password@host:port/database` (`postgres://` too; `?sslmode=...`
        and the other parameters asyncpg reads).
    max_age_s: responses older than this are deleted (default 30 days).
    max_rows: past this many responses, the oldest are deleted.
    pool_size: the most connections this process holds (each request borrows one per store call).
    """

    shared = True

    def __init__(
        self, url: str, *, max_age_s: float = 30 * 86400, max_rows: int = 100_000, pool_size: int = 10
    ) -> None:
        self.url = url
        self.max_age_s = max_age_s
        self.max_rows = max_rows
        self.pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._writes = 0
        self.notices: LocalNotices = PostgresNotices(url)

    async def open(self) -> None:
        pool = await asyncpg.create_pool(self.url, min_size=1, max_size=self.pool_size)
        try:
            async with pool.acquire() as conn:
                await upgrade_postgres(conn)  # SchemaTooNew when a newer vllm-responses migrated it
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        await self.notices.start()
        await self.prune()

    async def aclose(self) -> None:
        await self.notices.aclose()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the store is not open")
        return self._pool

    async def save(self, record: StoredResponse) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO responses VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET "
                "created_at = EXCLUDED.created_at, status = EXCLUDED.status, "
                "include_outputs = EXCLUDED.include_outputs, response = EXCLUDED.response, "
                "input_items = EXCLUDED.input_items, history = EXCLUDED.history",
                record.id,
                record.created_at,
                record.response.get("status", ""),
                record.include_outputs,
                json.dumps(record.response),
                json.dumps(record.input_items),
                json.dumps(record.history),
            )
            await conn.executemany(
                "INSERT INTO items VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET "
                "response_id = EXCLUDED.response_id, item = EXCLUDED.item",
                [(it["id"], record.id, json.dumps(it)) for it in own_items(record) if it.get("id")],
            )
        self._writes += 1
        if self._writes % 500 == 0:
            await self.prune()

    async def get(self, response_id: str) -> StoredResponse | None:
        row = await self.pool.fetchrow(f"SELECT {_COLUMNS} FROM responses WHERE id = $1", response_id)
        return None if row is None else _record(row)

    async def unfinished(self) -> list[StoredResponse]:
        rows = await self.pool.fetch(
            f"SELECT {_COLUMNS} FROM responses WHERE status IN ('queued', 'in_progress') ORDER BY created_at"
        )
        return [_record(row) for row in rows]

    async def delete(self, response_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM responses WHERE id = $1", response_id)
            await conn.execute("DELETE FROM items WHERE response_id = $1", response_id)
            await conn.execute("DELETE FROM response_events WHERE response_id = $1", response_id)
        return affected(status) > 0

    async def find_item(self, item_id: str) -> dict[str, Any] | None:
        text = await self.pool.fetchval("SELECT item FROM items WHERE id = $1", item_id)
        if text is None:
            return None
        item: dict[str, Any] = json.loads(text)
        return item

    async def prune(self) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM responses WHERE created_at < $1", time.time() - self.max_age_s)
            await conn.execute(
                "DELETE FROM responses WHERE id IN (SELECT id FROM responses ORDER BY created_at DESC OFFSET $1)",
                self.max_rows,
            )
            await conn.execute(
                "DELETE FROM items WHERE NOT EXISTS (SELECT 1 FROM responses r WHERE r.id = items.response_id)"
            )
            await conn.execute(
                "DELETE FROM response_events e WHERE NOT EXISTS (SELECT 1 FROM responses r WHERE r.id = e.response_id)"
            )
            await self._prune_conversations(conn)

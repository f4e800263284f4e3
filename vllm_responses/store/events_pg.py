"""The event half of `PostgresStore` (mixed into `store_pg.py`): `SQLiteEvents`' semantics in Postgres."""

from __future__ import annotations

import asyncpg

from vllm_responses.store.base import StoredEvent
from vllm_responses.store.notify import CHANNEL, events_key

__all__ = ["PostgresEvents"]


class PostgresEvents:
    """Background responses' stream events in Postgres (`PostgresStore` provides `pool`)."""

    @property
    def pool(self) -> asyncpg.Pool:
        raise NotImplementedError

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                "INSERT INTO response_events VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                [(response_id, seq, text) for seq, text in events],
            )
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, events_key(response_id))  # on commit

    async def events_after(self, response_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        rows = await self.pool.fetch(
            "SELECT seq, event FROM response_events WHERE response_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            response_id,
            after,
            limit,
        )
        return [(int(row["seq"]), str(row["event"])) for row in rows]

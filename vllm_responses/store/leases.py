"""Leases on running responses in the store (the `leases` table, migration 3): which replica runs a stored
response until when, and whether another replica asked for it to be cancelled. `replicas.py` uses them."""

from __future__ import annotations

import asyncpg

from vllm_responses.store.base import UNFINISHED_SQL
from vllm_responses.store.notify import CHANNEL, cancel_key

__all__ = ["PostgresLeases"]


class PostgresLeases:
    """The lease half of `PostgresStore` (which provides `pool`)."""

    @property
    def pool(self) -> asyncpg.Pool:
        raise NotImplementedError

    async def take_lease(self, response_id: str, owner: str, expires_at: float) -> None:
        await self.pool.execute(
            "INSERT INTO leases VALUES ($1, $2, $3, false) ON CONFLICT (response_id) DO UPDATE SET "
            "owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, cancel_requested = false",
            response_id,
            owner,
            expires_at,
        )

    async def renew_leases(self, owner: str, expires_at: float) -> list[str]:
        rows = await self.pool.fetch(
            "UPDATE leases SET expires_at = $1 WHERE owner = $2 RETURNING response_id, cancel_requested",
            expires_at,
            owner,
        )
        return [row["response_id"] for row in rows if row["cancel_requested"]]

    async def release_lease(self, response_id: str) -> None:
        await self.pool.execute("DELETE FROM leases WHERE response_id = $1", response_id)

    async def request_cancel(self, response_id: str) -> bool:
        rows = await self.pool.fetch(  # and wake the owner's heartbeat (the notice goes out on commit)
            "WITH flagged AS (UPDATE leases SET cancel_requested = true WHERE response_id = $1 RETURNING owner) "
            "SELECT pg_notify($2, $3 || owner) FROM flagged",
            response_id,
            CHANNEL,
            cancel_key(""),
        )
        return len(rows) > 0

    async def abandoned(self, now: float, dead_owner: str | None = None) -> list[str]:
        rows = await self.pool.fetch(
            "SELECT r.id FROM responses r LEFT JOIN leases l ON l.response_id = r.id "
            f"WHERE r.status IN {UNFINISHED_SQL} "
            "AND (l.response_id IS NULL OR l.expires_at < $1 OR l.owner = $2) ORDER BY r.created_at",
            now,
            dead_owner,
        )
        return [row["id"] for row in rows]

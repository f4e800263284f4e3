"""The conversation half of `PostgresStore` (mixed into `store_pg.py`): `SQLiteConversations`' semantics in Postgres."""

from __future__ import annotations

import json
import time
from typing import Any

import asyncpg

from vllm_responses.store.base import StoredConversation

__all__ = ["PostgresConversations", "affected"]


def affected(status: str) -> int:
    """The row count of an asyncpg command status ("DELETE 1", "UPDATE 0", "INSERT 0 1")."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresConversations:
    """Conversations in Postgres (`PostgresStore` provides `pool`, `max_age_s` and `max_rows`). Items are
    ordered by a `bigserial`; a write that touches both tables is one transaction."""

    max_age_s: float
    max_rows: int
    max_conversation_items: int = 10_000
    _conversations_created: int = 0

    @property
    def pool(self) -> asyncpg.Pool:
        raise NotImplementedError

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO conversations VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",  # a retry
                conversation.id,
                conversation.created_at,
                time.time(),
                json.dumps(conversation.metadata),
            )
            await self._insert_items(conn, conversation.id, items)
            self._conversations_created += 1
            if self._conversations_created % 500 == 0:
                await self._prune_conversations(conn)

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        row = await self.pool.fetchrow(
            "SELECT id, created_at, metadata FROM conversations WHERE id = $1", conversation_id
        )
        return None if row is None else StoredConversation(row[0], row[1], json.loads(row[2]))

    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        row = await self.pool.fetchrow(
            "UPDATE conversations SET metadata = $1, updated_at = $2 WHERE id = $3 "
            "RETURNING id, created_at, metadata",
            json.dumps(metadata),
            time.time(),
            conversation_id,
        )
        return None if row is None else StoredConversation(row[0], row[1], json.loads(row[2]))

    async def delete_conversation(self, conversation_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM conversations WHERE id = $1", conversation_id)
            await conn.execute("DELETE FROM conversation_items WHERE conversation_id = $1", conversation_id)
        return affected(status) > 0

    async def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute(
                "UPDATE conversations SET updated_at = $1 WHERE id = $2", time.time(), conversation_id
            )
            if affected(status) == 0:
                return False
            await self._insert_items(conn, conversation_id, items)
        return True

    async def _insert_items(self, conn: Any, conversation_id: str, items: list[dict[str, Any]]) -> None:
        await conn.executemany(
            "INSERT INTO conversation_items (conversation_id, id, item) VALUES ($1, $2, $3) "
            "ON CONFLICT (conversation_id, id) DO NOTHING",
            [(conversation_id, it["id"], json.dumps(it)) for it in items],
        )
        await conn.execute(  # the oldest items past the per-conversation bound
            "DELETE FROM conversation_items WHERE conversation_id = $1 AND seq IN (SELECT seq FROM "
            "conversation_items WHERE conversation_id = $1 ORDER BY seq DESC OFFSET $2)",
            conversation_id,
            self.max_conversation_items,
        )

    async def list_conversation_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        sql = "SELECT item FROM conversation_items WHERE conversation_id = $1"
        args: list[Any] = [conversation_id]
        if after is not None:  # an unknown `after` compares with NULL: no rows, as in SQLite
            sql += (
                f" AND seq {'<' if descending else '>'} "
                "(SELECT seq FROM conversation_items WHERE conversation_id = $1 AND id = $2)"
            )
            args.append(after)
        sql += f" ORDER BY seq {'DESC' if descending else 'ASC'} LIMIT ${len(args) + 1}"
        args.append(limit)  # NULL: no limit
        rows = await self.pool.fetch(sql, *args)
        return [json.loads(row[0]) for row in rows]

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        text = await self.pool.fetchval(
            "SELECT item FROM conversation_items WHERE conversation_id = $1 AND id = $2",
            conversation_id,
            item_id,
        )
        if text is None:
            return None
        item: dict[str, Any] = json.loads(text)
        return item

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        status = await self.pool.execute(
            "DELETE FROM conversation_items WHERE conversation_id = $1 AND id = $2", conversation_id, item_id
        )
        return affected(status) > 0

    async def _prune_conversations(self, conn: Any) -> None:
        """Conversations idle past the age or the row count, with their items (in the caller's transaction)."""
        await conn.execute("DELETE FROM conversations WHERE updated_at < $1", time.time() - self.max_age_s)
        await conn.execute(
            "DELETE FROM conversations WHERE id IN "
            "(SELECT id FROM conversations ORDER BY updated_at DESC OFFSET $1)",
            self.max_rows,
        )
        await conn.execute(
            "DELETE FROM conversation_items WHERE NOT EXISTS "
            "(SELECT 1 FROM conversations c WHERE c.id = conversation_items.conversation_id)"
        )

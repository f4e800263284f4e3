"""The store in Postgres (asyncpg, a bounded pool): `PostgresStore`, what lets several replicas share responses.

`PostgresStore` is the responses part of `ResponseStore` over one class per other part (conversations, events,
leases), each a `_Database`: the pool and bounds they all share; files and uploads are `PostgresFiles`'s. Its
public methods retry once on a lost connection (retry.py)."""

from __future__ import annotations

import json
import time
from typing import Any

import asyncpg

from vllm_responses.store.base import (
    DEFAULT_PROJECT,
    UNFINISHED_SQL,
    StoredConversation,
    StoredEvent,
    StoredResponse,
    item_rows,
    stored_size,
)
from vllm_responses.store.migrations import upgrade_postgres
from vllm_responses.store.notify import CHANNEL, LocalNotices, PostgresNotices, cancel_key, events_key
from vllm_responses.store.postgres_files import PostgresFiles
from vllm_responses.store.retry import retry_on_disconnect

__all__ = ["PostgresStore"]

_COLUMNS = "id, created_at, include_outputs, response, input_items, history, project"


def _record(row: Any) -> StoredResponse:
    return StoredResponse(
        id=row["id"],
        created_at=row["created_at"],
        include_outputs=row["include_outputs"],
        response=json.loads(row["response"]),
        input_items=json.loads(row["input_items"]),
        history=json.loads(row["history"]),
        project=row["project"],
    )


def _affected(status: str) -> int:
    """The row count of an asyncpg command status ("DELETE 1", "UPDATE 0", "INSERT 0 1")."""
    return int(status.rsplit(" ", 1)[-1])


class _Database(PostgresFiles):
    """The pool every part of `PostgresStore` uses, and the store's bounds."""

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

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the store is not open")
        return self._pool


class _Conversations(_Database):
    """Conversations and their items (`ConversationStore`). Items are ordered by a `bigserial`; a write that
    touches both tables is one transaction."""

    max_conversation_items: int = 10_000
    _conversations_created: int = 0

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO conversations (id, created_at, updated_at, metadata, project) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",  # a retry
                conversation.id,
                conversation.created_at,
                time.time(),
                json.dumps(conversation.metadata),
                conversation.project,
            )
            await self._insert_items(conn, conversation.id, items)
            self._conversations_created += 1
            if self._conversations_created % 500 == 0:
                await self._prune_conversations(conn)
        await self.sweep_files(time.time())

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        row = await self.pool.fetchrow(
            "SELECT id, created_at, metadata, project FROM conversations WHERE id = $1", conversation_id
        )
        return None if row is None else StoredConversation(row[0], row[1], json.loads(row[2]), row[3])

    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        row = await self.pool.fetchrow(
            "UPDATE conversations SET metadata = $1, updated_at = $2 WHERE id = $3 "
            "RETURNING id, created_at, metadata, project",
            json.dumps(metadata),
            time.time(),
            conversation_id,
        )
        return None if row is None else StoredConversation(row[0], row[1], json.loads(row[2]), row[3])

    async def delete_conversation(self, conversation_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM conversations WHERE id = $1", conversation_id)
            await conn.execute("DELETE FROM conversation_items WHERE conversation_id = $1", conversation_id)
        return _affected(status) > 0

    async def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute(
                "UPDATE conversations SET updated_at = $1 WHERE id = $2", time.time(), conversation_id
            )
            if _affected(status) == 0:
                return False
            await self._insert_items(conn, conversation_id, items)
        return True

    async def _insert_items(self, conn: Any, conversation_id: str, items: list[dict[str, Any]]) -> None:
        texts = [(it["id"], json.dumps(it)) for it in items]
        await conn.executemany(
            "INSERT INTO conversation_items (conversation_id, id, item, bytes) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (conversation_id, id) DO NOTHING",
            [(conversation_id, item_id, text, stored_size(text)) for item_id, text in texts],
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
        return _affected(status) > 0

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


class _Events(_Database):
    """Background responses' stream events (`EventStore`); each batch stored wakes the replicas following it."""

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


class _Leases(_Database):
    """Leases on running responses (`LeaseStore`); a cancel request wakes the owner's heartbeat."""

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


@retry_on_disconnect  # a lost connection: retried once, then a 503 (retry.py)
class PostgresStore(_Conversations, _Leases, _Events):
    """Postgres through an asyncpg pool; the same tables, semantics and bounds as `SQLiteStore`.

    Parameters
    ----------
    url: a libpq URL, `postgresql://user:password@host:port/database` (`postgres://` too; `?sslmode=...`
        and the other parameters asyncpg reads).
    max_age_s: responses older than this are deleted (default 30 days).
    max_rows: past this many responses, the oldest are deleted.
    pool_size: the most connections this process holds (each request borrows one per store call).
    """

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

    async def save(self, record: StoredResponse) -> None:
        texts = (json.dumps(record.response), json.dumps(record.input_items), json.dumps(record.history))
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO responses (id, created_at, status, include_outputs, response, input_items, "
                "history, project, bytes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO "
                "UPDATE SET created_at = EXCLUDED.created_at, status = EXCLUDED.status, "
                "include_outputs = EXCLUDED.include_outputs, response = EXCLUDED.response, "
                "input_items = EXCLUDED.input_items, history = EXCLUDED.history, bytes = EXCLUDED.bytes",
                record.id,
                record.created_at,
                record.response.get("status", ""),
                record.include_outputs,
                *texts,
                record.project,
                stored_size(*texts),
            )
            await conn.executemany(
                "INSERT INTO items (project, id, response_id, item) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (project, id) DO UPDATE SET response_id = EXCLUDED.response_id, item = EXCLUDED.item",
                item_rows(record),
            )
        self._writes += 1
        if self._writes % 500 == 0:
            await self.prune()

    async def get(self, response_id: str) -> StoredResponse | None:
        row = await self.pool.fetchrow(f"SELECT {_COLUMNS} FROM responses WHERE id = $1", response_id)
        return None if row is None else _record(row)

    async def unfinished(self) -> list[StoredResponse]:
        rows = await self.pool.fetch(
            f"SELECT {_COLUMNS} FROM responses WHERE status IN {UNFINISHED_SQL} ORDER BY created_at"
        )
        return [_record(row) for row in rows]

    async def delete(self, response_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM responses WHERE id = $1", response_id)
            await conn.execute("DELETE FROM items WHERE response_id = $1", response_id)
            await conn.execute("DELETE FROM response_events WHERE response_id = $1", response_id)
        return _affected(status) > 0

    async def find_item(self, item_id: str, project: str = DEFAULT_PROJECT) -> dict[str, Any] | None:
        text = await self.pool.fetchval(
            "SELECT item FROM items WHERE project = $1 AND id = $2", project, item_id
        )
        if text is None:
            return None
        item: dict[str, Any] = json.loads(text)
        return item

    async def stored_bytes(self, project: str) -> int:
        total = await self.pool.fetchval(
            "SELECT (SELECT coalesce(sum(bytes), 0) FROM responses WHERE project = $1) + (SELECT "
            "coalesce(sum(i.bytes), 0) FROM conversation_items i JOIN conversations c ON c.id = "
            "i.conversation_id WHERE c.project = $1)",
            project,
        )
        return int(total or 0) + await self._file_bytes_sql(project)

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
        await self.sweep_files(time.time())

"""The store in SQLite (WAL mode, through aiosqlite: one connection, its own thread): `SQLiteStore`, the default.

`SQLiteStore` is the responses part of `ResponseStore` over one class per other part (conversations, events,
leases), each a `_Database`: the connection and bounds they all share; files and uploads are `SQLiteFiles`'s."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiosqlite

from vllm_responses.store.base import (
    DEFAULT_PROJECT,
    UNFINISHED_SQL,
    StoredConversation,
    StoredEvent,
    StoredResponse,
    item_rows,
    stored_size,
)
from vllm_responses.store.files import private_file
from vllm_responses.store.migrations import upgrade_sqlite
from vllm_responses.store.notify import LocalNotices
from vllm_responses.store.sqlite_files import SQLiteFiles

__all__ = ["SQLiteStore"]


class _Database(SQLiteFiles):
    """The connection every part of `SQLiteStore` uses, and the store's bounds."""

    shared = False

    def __init__(self, path: str | Path, *, max_age_s: float = 30 * 86400, max_rows: int = 100_000) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path).expanduser())
        self.max_age_s = max_age_s
        self.max_rows = max_rows
        self._db: aiosqlite.Connection | None = None
        self._writes = 0
        self.notices = LocalNotices()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("the store is not open")
        return self._db


class _Conversations(_Database):
    """Conversations and their items (`ConversationStore`)."""

    max_conversation_items: int = 10_000
    _conversations_created: int = 0

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        await self.db.execute(
            "INSERT OR IGNORE INTO conversations (id, created_at, updated_at, metadata, project) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                conversation.id,
                conversation.created_at,
                time.time(),
                json.dumps(conversation.metadata),
                conversation.project,
            ),
        )
        await self._insert_items(conversation.id, items)
        self._conversations_created += 1
        if self._conversations_created % 500 == 0:
            await self._prune_conversations()
        await self.db.commit()

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        async with self.db.execute(
            "SELECT id, created_at, metadata, project FROM conversations WHERE id = ?", (conversation_id,)
        ) as cur:
            row = await cur.fetchone()
        return None if row is None else StoredConversation(row[0], row[1], json.loads(row[2]), row[3])

    async def update_conversation(
        self, conversation_id: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        await self.db.execute(
            "UPDATE conversations SET metadata = ?, updated_at = ? WHERE id = ?",
            (json.dumps(metadata), time.time(), conversation_id),
        )
        await self.db.commit()
        return await self.get_conversation(conversation_id)

    async def delete_conversation(self, conversation_id: str) -> bool:
        cur = await self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        await self.db.execute("DELETE FROM conversation_items WHERE conversation_id = ?", (conversation_id,))
        await self.db.commit()
        return cur.rowcount > 0

    async def add_conversation_items(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        cur = await self.db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", (time.time(), conversation_id)
        )
        if cur.rowcount == 0:
            return False
        await self._insert_items(conversation_id, items)
        await self.db.commit()
        return True

    async def _insert_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        texts = [(it["id"], json.dumps(it)) for it in items]
        await self.db.executemany(
            "INSERT OR IGNORE INTO conversation_items (conversation_id, id, item, bytes) VALUES (?, ?, ?, ?)",
            [(conversation_id, item_id, text, stored_size(text)) for item_id, text in texts],
        )
        await self.db.execute(  # the oldest items past the per-conversation bound
            "DELETE FROM conversation_items WHERE conversation_id = ? AND seq IN (SELECT seq FROM "
            "conversation_items WHERE conversation_id = ? ORDER BY seq DESC LIMIT -1 OFFSET ?)",
            (conversation_id, conversation_id, self.max_conversation_items),
        )

    async def list_conversation_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        sql = "SELECT item FROM conversation_items WHERE conversation_id = ?"
        args: list[Any] = [conversation_id]
        if after is not None:
            sql += (
                f" AND seq {'<' if descending else '>'} "
                "(SELECT seq FROM conversation_items WHERE conversation_id = ? AND id = ?)"
            )
            args += [conversation_id, after]
        sql += f" ORDER BY seq {'DESC' if descending else 'ASC'} LIMIT ?"
        args.append(-1 if limit is None else limit)
        async with self.db.execute(sql, args) as cur:
            rows = await cur.fetchall()
        return [json.loads(row[0]) for row in rows]

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        async with self.db.execute(
            "SELECT item FROM conversation_items WHERE conversation_id = ? AND id = ?",
            (conversation_id, item_id),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        item: dict[str, Any] = json.loads(row[0])
        return item

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        cur = await self.db.execute(
            "DELETE FROM conversation_items WHERE conversation_id = ? AND id = ?", (conversation_id, item_id)
        )
        await self.db.commit()
        return cur.rowcount > 0

    async def _prune_conversations(self) -> None:
        await self.db.execute(
            "DELETE FROM conversations WHERE updated_at < ?", (time.time() - self.max_age_s,)
        )
        await self.db.execute(
            "DELETE FROM conversations WHERE id IN "
            "(SELECT id FROM conversations ORDER BY updated_at DESC LIMIT -1 OFFSET ?)",
            (self.max_rows,),
        )
        await self.db.execute(
            "DELETE FROM conversation_items WHERE conversation_id NOT IN (SELECT id FROM conversations)"
        )


class _Events(_Database):
    """Background responses' stream events (`EventStore`)."""

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        await self.db.executemany(
            "INSERT OR IGNORE INTO response_events VALUES (?, ?, ?)",
            [(response_id, seq, text) for seq, text in events],
        )
        await self.db.commit()

    async def events_after(self, response_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        async with self.db.execute(
            "SELECT seq, event FROM response_events WHERE response_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (response_id, after, limit),
        ) as cur:
            return [(int(row[0]), str(row[1])) for row in await cur.fetchall()]


class _Leases(_Database):
    """Leases on running responses (`LeaseStore`)."""

    async def take_lease(self, response_id: str, owner: str, expires_at: float) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, 0)", (response_id, owner, expires_at)
        )
        await self.db.commit()

    async def renew_leases(self, owner: str, expires_at: float) -> list[str]:
        await self.db.execute("UPDATE leases SET expires_at = ? WHERE owner = ?", (expires_at, owner))
        await self.db.commit()
        query = "SELECT response_id FROM leases WHERE owner = ? AND cancel_requested = 1"
        async with self.db.execute(query, (owner,)) as cur:
            return [row[0] for row in await cur.fetchall()]

    async def release_lease(self, response_id: str) -> None:
        await self.db.execute("DELETE FROM leases WHERE response_id = ?", (response_id,))
        await self.db.commit()

    async def request_cancel(self, response_id: str) -> bool:
        cur = await self.db.execute(
            "UPDATE leases SET cancel_requested = 1 WHERE response_id = ?", (response_id,)
        )
        await self.db.commit()
        return cur.rowcount > 0

    async def abandoned(self, now: float, dead_owner: str | None = None) -> list[str]:
        query = (
            "SELECT r.id FROM responses r LEFT JOIN leases l ON l.response_id = r.id "
            f"WHERE r.status IN {UNFINISHED_SQL} AND (l.response_id IS NULL OR l.expires_at < ? OR l.owner = ?)"
        )
        async with self.db.execute(query, (now, dead_owner)) as cur:
            return [row[0] for row in await cur.fetchall()]


class SQLiteStore(_Conversations, _Leases, _Events):
    """SQLite in WAL mode through aiosqlite (one connection, its own thread).

    Parameters
    ----------
    path: the database file (created with its folder); ":memory:" for a throwaway store.
    max_age_s: responses older than this are deleted (default 30 days).
    max_rows: past this many responses, the oldest are deleted.
    """

    async def open(self) -> None:
        if self.path != ":memory:":
            private_file(self.path)
        self._db = await aiosqlite.connect(self.path)
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            await upgrade_sqlite(self._db, self.path)  # SchemaTooNew when a newer vllm-responses migrated it
        except BaseException:
            await self.aclose()
            raise
        await self.prune()

    async def aclose(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def save(self, record: StoredResponse) -> None:
        texts = (json.dumps(record.response), json.dumps(record.input_items), json.dumps(record.history))
        await self.db.execute(
            "INSERT OR REPLACE INTO responses "
            "(id, created_at, status, include_outputs, response, input_items, history, project, bytes) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.id,
                record.created_at,
                record.response.get("status", ""),
                int(record.include_outputs),
                *texts,
                record.project,
                stored_size(*texts),
            ),
        )
        await self.db.executemany(
            "INSERT OR REPLACE INTO items (project, id, response_id, item) VALUES (?, ?, ?, ?)",
            item_rows(record),
        )
        await self.db.commit()
        self._writes += 1
        if self._writes % 500 == 0:
            await self.prune()

    async def get(self, response_id: str) -> StoredResponse | None:
        async with self.db.execute(
            "SELECT id, created_at, include_outputs, response, input_items, history, project FROM responses "
            "WHERE id = ?",
            (response_id,),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        return StoredResponse(
            id=row[0],
            created_at=row[1],
            include_outputs=bool(row[2]),
            response=json.loads(row[3]),
            input_items=json.loads(row[4]),
            history=json.loads(row[5]),
            project=row[6],
        )

    async def unfinished(self) -> list[StoredResponse]:
        query = f"SELECT id FROM responses WHERE status IN {UNFINISHED_SQL}"
        async with self.db.execute(query) as cur:
            ids = [row[0] for row in await cur.fetchall()]
        return [r for r in [await self.get(i) for i in ids] if r is not None]

    async def delete(self, response_id: str) -> bool:
        cur = await self.db.execute("DELETE FROM responses WHERE id = ?", (response_id,))
        await self.db.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
        await self.db.execute("DELETE FROM response_events WHERE response_id = ?", (response_id,))
        await self.db.commit()
        return cur.rowcount > 0

    async def find_item(self, item_id: str, project: str = DEFAULT_PROJECT) -> dict[str, Any] | None:
        async with self.db.execute(
            "SELECT item FROM items WHERE project = ? AND id = ?", (project, item_id)
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        item: dict[str, Any] = json.loads(row[0])
        return item

    async def stored_bytes(self, project: str) -> int:
        async with self.db.execute(
            "SELECT (SELECT coalesce(sum(bytes), 0) FROM responses WHERE project = ?) + (SELECT "
            "coalesce(sum(i.bytes), 0) FROM conversation_items i JOIN conversations c ON c.id = "
            "i.conversation_id WHERE c.project = ?)",
            (project, project),
        ) as cur:
            row = await cur.fetchone()
        return (int(row[0]) if row else 0) + await self._file_bytes_sql(project)

    async def prune(self) -> None:
        await self.db.execute("DELETE FROM responses WHERE created_at < ?", (time.time() - self.max_age_s,))
        await self.db.execute(
            "DELETE FROM responses WHERE id IN (SELECT id FROM responses ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
            (self.max_rows,),
        )
        await self.db.execute("DELETE FROM items WHERE response_id NOT IN (SELECT id FROM responses)")
        await self.db.execute(
            "DELETE FROM response_events WHERE response_id NOT IN (SELECT id FROM responses)"
        )
        await self._prune_conversations()
        await self.db.commit()
        await self.sweep_files(time.time())

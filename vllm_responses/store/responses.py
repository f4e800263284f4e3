"""Stored responses in SQLite (WAL, async, bounded) or in memory, and the store `--db` names."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiosqlite

from vllm_responses.store.base import ResponseStore, StoredResponse, own_items
from vllm_responses.store.conversations import MemoryConversations, SQLiteConversations
from vllm_responses.store.events import MemoryEvents, SQLiteEvents
from vllm_responses.store.leases import MemoryLeases, SQLiteLeases
from vllm_responses.store.migrations import is_postgres_url, upgrade_sqlite
from vllm_responses.store.notify import LocalNotices

__all__ = ["MemoryStore", "SQLiteStore", "open_store", "store_for"]


class SQLiteStore(SQLiteConversations, SQLiteLeases, SQLiteEvents):
    """SQLite in WAL mode through aiosqlite (one connection, its own thread).

    Parameters
    ----------
    path: the database file (created with its folder); ":memory:" for a throwaway store.
    max_age_s: responses older than this are deleted (default 30 days).
    max_rows: past this many responses, the oldest are deleted.
    """

    shared = False

    def __init__(self, path: str | Path, *, max_age_s: float = 30 * 86400, max_rows: int = 100_000) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path).expanduser())
        self.max_age_s = max_age_s
        self.max_rows = max_rows
        self._db: aiosqlite.Connection | None = None
        self._writes = 0
        self.notices = LocalNotices()

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
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

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("the store is not open")
        return self._db

    async def save(self, record: StoredResponse) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                record.id,
                record.created_at,
                record.response.get("status", ""),
                int(record.include_outputs),
                json.dumps(record.response),
                json.dumps(record.input_items),
                json.dumps(record.history),
            ),
        )
        await self.db.executemany(
            "INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
            [(it["id"], record.id, json.dumps(it)) for it in own_items(record) if it.get("id")],
        )
        await self.db.commit()
        self._writes += 1
        if self._writes % 500 == 0:
            await self.prune()

    async def get(self, response_id: str) -> StoredResponse | None:
        async with self.db.execute(
            "SELECT id, created_at, include_outputs, response, input_items, history FROM responses WHERE id = ?",
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
        )

    async def unfinished(self) -> list[StoredResponse]:
        query = "SELECT id FROM responses WHERE status IN ('queued', 'in_progress')"
        async with self.db.execute(query) as cur:
            ids = [row[0] for row in await cur.fetchall()]
        return [r for r in [await self.get(i) for i in ids] if r is not None]

    async def delete(self, response_id: str) -> bool:
        cur = await self.db.execute("DELETE FROM responses WHERE id = ?", (response_id,))
        await self.db.execute("DELETE FROM items WHERE response_id = ?", (response_id,))
        await self.db.execute("DELETE FROM response_events WHERE response_id = ?", (response_id,))
        await self.db.commit()
        return cur.rowcount > 0

    async def find_item(self, item_id: str) -> dict[str, Any] | None:
        async with self.db.execute("SELECT item FROM items WHERE id = ?", (item_id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        item: dict[str, Any] = json.loads(row[0])
        return item

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


class MemoryStore(MemoryConversations, MemoryLeases, MemoryEvents):
    """A bounded in-process store (tests, or `--db :memory:`)."""

    shared = False

    def __init__(self, max_rows: int = 10_000) -> None:
        MemoryConversations.__init__(self)
        MemoryEvents.__init__(self)
        self.max_rows = max_rows
        self._rows: dict[str, StoredResponse] = {}
        self._leases = {}
        self.notices = LocalNotices()

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        self._rows.clear()

    async def prune(self) -> None:
        return None  # bounded as it goes: `save` drops the oldest past `max_rows`

    async def save(self, record: StoredResponse) -> None:
        self._rows.pop(record.id, None)
        self._rows[record.id] = record
        while len(self._rows) > self.max_rows:
            self._drop_events(self._rows.pop(next(iter(self._rows))).id)

    async def get(self, response_id: str) -> StoredResponse | None:
        return self._rows.get(response_id)

    async def delete(self, response_id: str) -> bool:
        self._drop_events(response_id)
        return self._rows.pop(response_id, None) is not None

    async def unfinished(self) -> list[StoredResponse]:
        return [r for r in self._rows.values() if r.response.get("status") in ("queued", "in_progress")]

    async def _unfinished_ids(self) -> list[str]:
        return [r.id for r in await self.unfinished()]

    async def find_item(self, item_id: str) -> dict[str, Any] | None:
        for record in reversed(self._rows.values()):
            for item in own_items(record):
                if item.get("id") == item_id:
                    return item
        return None


def store_for(
    db: str | Path, *, max_age_s: float = 30 * 86400, max_rows: int | None = None, pool_size: int = 10
) -> ResponseStore:
    """The store `--db` names, not yet open: `postgresql://...` (or `postgres://...`) a `PostgresStore` with
    at most `pool_size` connections, ":memory:" a `MemoryStore`, anything else a SQLite file."""
    db = str(db)
    if is_postgres_url(db):
        from vllm_responses.store.postgres import PostgresStore

        return PostgresStore(db, max_age_s=max_age_s, max_rows=max_rows or 100_000, pool_size=pool_size)
    if db == ":memory:":
        return MemoryStore() if max_rows is None else MemoryStore(max_rows=max_rows)
    return SQLiteStore(db, max_age_s=max_age_s, max_rows=max_rows or 100_000)


async def open_store(db: str | Path, *, pool_size: int = 10) -> ResponseStore:
    """`store_for(db)`, opened (connected and migrated)."""
    store = store_for(db, pool_size=pool_size)
    await store.open()
    return store

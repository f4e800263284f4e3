"""Stored responses in memory, and the store `--db` names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_responses.store.base import ResponseStore, StoredResponse, own_items
from vllm_responses.store.conversations import MemoryConversations
from vllm_responses.store.events import MemoryEvents
from vllm_responses.store.leases import MemoryLeases
from vllm_responses.store.migrations import is_postgres_url
from vllm_responses.store.notify import LocalNotices
from vllm_responses.store.sqlite import SQLiteStore

__all__ = ["MemoryStore", "open_store", "store_for"]


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

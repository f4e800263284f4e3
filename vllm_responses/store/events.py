"""Stored stream events: the SQLite and in-memory halves of `EventStore` (base.py), mixed into responses.py's stores."""

from __future__ import annotations

import aiosqlite

from vllm_responses.store.base import StoredEvent

__all__ = ["MemoryEvents", "SQLiteEvents"]


class SQLiteEvents:
    """The event half of `SQLiteStore` (which provides `db`)."""

    @property
    def db(self) -> aiosqlite.Connection:
        raise NotImplementedError

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


class MemoryEvents:
    """The event half of `MemoryStore`: dropped with their response (`_drop_events`)."""

    def __init__(self) -> None:
        self._events: dict[str, dict[int, str]] = {}

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        kept = self._events.setdefault(response_id, {})
        for seq, text in events:
            kept.setdefault(seq, text)

    async def events_after(self, response_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        kept = self._events.get(response_id, {})
        return sorted((seq, text) for seq, text in kept.items() if seq > after)[:limit]

    def _drop_events(self, response_id: str) -> None:
        self._events.pop(response_id, None)

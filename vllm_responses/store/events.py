"""Stored stream events of background responses: the `EventStore` interface and its SQLite and in-memory halves
(mixed into `store.py`'s stores; Postgres: event_store_pg.py).

An event is kept as its sequence number and the one-line JSON the SSE `data:` line carries, so a replica that
re-streams it writes the very bytes the running replica wrote. Events go with their response (`delete`, and
the store's bounds: `prune` drops the events of responses no longer kept)."""

from __future__ import annotations

from typing import Protocol

import aiosqlite

__all__ = ["EventStore", "MemoryEvents", "SQLiteEvents", "StoredEvent"]

# (sequence number, the event as one-line JSON)
StoredEvent = tuple[int, str]


class EventStore(Protocol):
    """The stream events of background responses, by response id and sequence number."""

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        """Keep `events` of `response_id` (one transaction; a sequence number kept already is skipped)."""
        ...

    async def events_after(self, response_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        """The kept events of `response_id` with a sequence number above `after`, in order, at most `limit`."""
        ...


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

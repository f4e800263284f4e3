"""Stored stream events: the in-memory half of `EventStore` (base.py), mixed into `MemoryStore`."""

from __future__ import annotations

from vllm_responses.store.base import StoredEvent

__all__ = ["MemoryEvents"]


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

"""`EventLog`: a background response's stream events written to the store in batches while it runs, so that
any replica can re-stream it (restream.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from vllm_responses.protocol.events import Event
from vllm_responses.store.base import EventStore, StoredEvent

__all__ = ["FLUSH_EVENTS", "FLUSH_INTERVAL_S", "EventLog", "event_json"]

logger = logging.getLogger(__name__)

# A batch is written at most this long after its first event was added, or at once when it holds this many:
# one store write per ~100 ms of tokens, not one per token.
FLUSH_INTERVAL_S = 0.1
FLUSH_EVENTS = 64


def event_json(event: Event) -> str:
    """The event as the SSE `data:` line carries it (`api/responses.sse_frame`): one line of compact JSON."""
    return json.dumps(event, separators=(",", ":"))


class EventLog:
    """The events of one response, added as they are published and written by a task of its own in
    batches (`FLUSH_INTERVAL_S` / `FLUSH_EVENTS`); `aclose` writes what is left, the terminal event included.
    A failed write is logged and its events kept for the next one (a write of a kept event is a no-op)."""

    def __init__(
        self,
        store: EventStore,
        response_id: str,
        *,
        interval_s: float = FLUSH_INTERVAL_S,
        batch: int = FLUSH_EVENTS,
    ) -> None:
        self.store = store
        self.response_id = response_id
        self.interval_s = interval_s
        self.batch = batch
        self._pending: list[StoredEvent] = []
        self._some = asyncio.Event()  # something to write
        self._full = asyncio.Event()  # a whole batch (or the end): write now
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    def add(self, event: Event) -> None:
        self._pending.append((event["sequence_number"], event_json(event)))
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"event log {self.response_id}")
        self._some.set()
        if len(self._pending) >= self.batch:
            self._full.set()

    async def _run(self) -> None:
        while not self._closed:
            await self._some.wait()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self._full.wait()
            self._some.clear()
            self._full.clear()
            await self._flush()

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            await self.store.append_events(self.response_id, batch)
        except Exception:
            logger.exception(
                "could not store %d stream event(s) of response %s", len(batch), self.response_id
            )
            self._pending = batch + self._pending

    async def aclose(self) -> None:
        """Write every event added so far (after the write in flight, if any), then stop."""
        self._closed = True
        if self._task is not None:
            self._some.set()
            self._full.set()
            await self._task
        await self._flush()

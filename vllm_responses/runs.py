"""A running response: its task, the events it has produced so far, and the streams that follow it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from vllm_responses.errors import APIError
from vllm_responses.protocol.events import Event
from vllm_responses.stream import ResponseBuilder

__all__ = ["Run"]

_END = object()


class Run:
    """Events of one response, kept in order so a stream can join late (`starting_after`) and a
    background response can be followed, retrieved or cancelled while it runs."""

    def __init__(self, builder: ResponseBuilder, *, background: bool) -> None:
        self.builder = builder
        self.background = background
        self.events: list[Event] = []
        self.done = asyncio.Event()
        # Set once the response produced something past `response.in_progress`, or ended.
        self.under_way = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        # Why the response failed, when it did (a request the engine refused is answered 4xx if nothing
        # was streamed yet).
        self.failure: APIError | None = None
        self._followers: set[asyncio.Queue[Any]] = set()

    @property
    def id(self) -> str:
        return self.builder.id

    def publish(self, event: Event) -> None:
        self.events.append(event)
        if len(self.events) > 2:
            self.under_way.set()
        for q in self._followers:
            q.put_nowait(event)

    def close(self) -> None:
        self.done.set()
        self.under_way.set()
        for q in self._followers:
            q.put_nowait(_END)

    async def follow_batches(self, starting_after: int | None = None) -> AsyncIterator[list[Event]]:
        """Every event after sequence number `starting_after` (all when None), live until the end, in
        batches: each is every event that was ready when the reader came back (the backlog, then all that
        queued up meanwhile), so a reader that falls behind catches up in one write instead of one per event."""
        q: asyncio.Queue[Any] = asyncio.Queue()
        start = 0 if starting_after is None else starting_after + 1
        backlog = self.events[start:]
        finished = self.done.is_set()
        if not finished:
            self._followers.add(q)
        try:
            if backlog:
                yield backlog
            if finished:
                return
            while True:
                batch = [await q.get()]
                while not q.empty():
                    batch.append(q.get_nowait())
                end = batch[-1] is _END
                if end:
                    batch.pop()
                if batch:
                    yield batch
                if end:
                    return
        finally:
            self._followers.discard(q)

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel("response cancelled")

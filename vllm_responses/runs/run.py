"""A running response: its task, the events it has produced so far, and the streams that follow it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.protocol.errors import APIError
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.items import ResponseObject
from vllm_responses.store.base import DEFAULT_PROJECT

__all__ = ["Run"]

_END = object()
_IDLE = object()


class Run:
    """Events of one response, kept in order so a stream can join late (`starting_after`) and a
    background response can be followed, retrieved or cancelled while it runs."""

    def __init__(self, builder: ResponseBuilder, *, background: bool, project: str = DEFAULT_PROJECT) -> None:
        self.builder = builder
        self.background = background
        self.project = project  # whose API key made it: another project's key does not find it
        self.events: list[Event] = []
        self.done = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        # Why the response failed, when it did (a non-streamed one refused before any output is a 4xx).
        self.failure: APIError | None = None
        # Whether it failed while it waited for admission (the server closed it): it never ran.
        self.unadmitted = False
        # Set by `end`: the error the response is ended with when its task is cancelled.
        self.ending: APIError | None = None
        self.cancel_asked = False  # `cancel` was called: later calls do nothing
        # A background response's answer to its create: the response as acknowledged (status `queued`).
        self.acknowledgement: ResponseObject | None = None
        self._followers: set[asyncio.Queue[Any]] = set()

    @property
    def id(self) -> str:
        return self.builder.id

    def publish(self, event: Event) -> None:
        self.events.append(event)
        for q in self._followers:
            q.put_nowait(event)

    def close(self) -> None:
        self.done.set()
        for q in self._followers:
            q.put_nowait(_END)

    async def follow_batches(
        self, starting_after: int | None = None, *, idle_s: float = 0.0
    ) -> AsyncIterator[list[Event]]:
        """Every event after sequence number `starting_after` (all when None), live until the end, in
        batches: each is every event that was ready when the reader came back (the backlog, then all that
        queued up meanwhile), so a reader that falls behind catches up in one write instead of one per event.
        With `idle_s` > 0, an empty batch comes whenever nothing did for `idle_s` seconds (a keep-alive)."""
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
                if idle_s > 0 and q.empty():
                    first: Any = _IDLE
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(idle_s):  # a cancelled `get` leaves the queue as it was
                            first = await q.get()
                    if first is _IDLE:
                        yield []
                        continue
                else:
                    first = await q.get()
                batch = [first]
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
        """Cancel the run's task, once. Cancelled again while it stores its end (a client's second cancel, a
        replica's next heartbeat), the task ended before its last record was written: its lease then went
        first, and another replica's sweep failed the response."""
        if self.task is not None and not self.task.done() and not self.cancel_asked:
            self.cancel_asked = True
            self.task.cancel("response cancelled")

    def end(self, error: APIError) -> None:
        """Stop the response now and end it `failed` with `error`, streamed and stored (server shutdown,
        engine death), where `cancel` ends it `cancelled` with no event."""
        if self.task is not None and not self.task.done():
            self.ending = error
            self.task.cancel(error.message)

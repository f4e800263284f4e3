"""Re-streaming a background response from the store (`GET /v1/responses/{id}?stream=true`) on a replica that
does not run it, or once its run has left memory: the stored events after `starting_after`, then new ones
as the running replica writes them (polled), until its terminal event."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator

from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.items import wire_items
from vllm_responses.protocol.status import TERMINAL, TERMINAL_EVENTS, ResponseStatus
from vllm_responses.store.base import ResponseStore, StoredResponse
from vllm_responses.store.notify import events_key, wait_woken

__all__ = ["Restreams", "StoredFrame"]

# (event type, the event as one-line JSON): what one SSE frame carries
StoredFrame = tuple[str, str]

# Read at most this many events per store call; a reader behind reads again at once.
_PAGE = 1000
# While no event comes, the response's record is read at most this often, to end the stream of one that
# ended without a terminal event (cancelled; failed by a restart or by another replica), or was deleted.
_STATUS_EVERY_S = 1.0
_MAX_SEQ = 2**31 - 1  # the column is a 32-bit integer


class Restreams:
    """Streams served from `store`, polled every `poll_s` seconds; `active` counts those polling now."""

    def __init__(self, store: ResponseStore, poll_s: float) -> None:
        self.store = store
        self.poll_s = max(poll_s, 0.01)
        self.active = 0

    async def check(self, response_id: str) -> None:
        """Before the stream starts: a 404 for an unknown response, a 400 for one that cannot be re-streamed
        (not a background one, or one whose events are gone: pruned, or kept before events were)."""
        stored = await self.store.get(response_id)
        if stored is None:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        if not stored.response.get("background"):
            raise InvalidRequest(
                "This response is no longer streamable; retrieve it without stream.", param="stream"
            )
        if stored.response.get("status") in TERMINAL and not await self.store.events_after(
            response_id, -1, 1
        ):
            raise InvalidRequest(
                "This response's stream events are no longer kept; retrieve it without stream.",
                param="stream",
            )

    async def follow(
        self, response_id: str, starting_after: int | None, *, keepalive_s: float = 0.0
    ) -> AsyncIterator[list[StoredFrame]]:
        """The stored events after `starting_after` (all when None) in batches, then new ones as they are
        stored, until the terminal event (or the response is over or gone); an empty batch after
        `keepalive_s` seconds with nothing sent (when > 0). Cancelled (a client that left), it stops. A
        response stored `failed` with no terminal event (its replica died: a restart or another replica
        marked it) ends with a `response.failed` made from its stored record."""
        last = -1 if starting_after is None else max(-1, min(starting_after, _MAX_SEQ))
        self.active += 1
        try:
            with self.store.notices.waiter(events_key(response_id)) as woken:
                async with contextlib.aclosing(
                    self._follow(response_id, last, keepalive_s, woken)
                ) as batches:
                    async for batch in batches:
                        yield batch
        finally:
            self.active -= 1

    async def _follow(
        self, response_id: str, last: int, keepalive_s: float, woken: asyncio.Event
    ) -> AsyncGenerator[list[StoredFrame], None]:
        """`follow`'s loop; a notice of new events (`woken`) cuts its poll wait short."""
        sent = checked = time.monotonic()
        over: StoredResponse | None = None
        while True:
            woken.clear()  # a notice from here on is for events this read may not see
            rows = await self.store.events_after(response_id, last, _PAGE)
            if rows:
                batch: list[StoredFrame] = []
                for seq, text in rows:
                    kind = str(json.loads(text)["type"])
                    batch.append((kind, text))
                    last = seq
                    if kind in TERMINAL_EVENTS:
                        yield batch
                        return
                yield batch
                sent = time.monotonic()
                if len(rows) == _PAGE:
                    continue
            elif over is not None:
                if over.response.get("status") == ResponseStatus.FAILED:
                    yield [_failed_event(over, last + 1)]
                return
            elif time.monotonic() - checked >= max(_STATUS_EVERY_S, self.poll_s):
                checked = time.monotonic()
                stored = await self.store.get(response_id)
                if stored is None:
                    return
                # over: every event it will have is stored (the driver writes them first)
                if stored.response.get("status") in TERMINAL:
                    over = stored  # one more read: what was stored before the record says it is over
                    continue
            if keepalive_s > 0 and time.monotonic() - sent >= keepalive_s:
                yield []
                sent = time.monotonic()
            await wait_woken(woken, self.poll_s)


def _failed_event(stored: StoredResponse, sequence_number: int) -> StoredFrame:
    """The `response.failed` a response gets when its replica could not send one: its stored record."""
    output = wire_items(  # as kept
        stored.response["output"], stored.include_outputs, include_sources=True, include_results=True
    )
    response = {**stored.response, "output": output}
    event = {"type": "response.failed", "sequence_number": sequence_number, "response": response}
    return "response.failed", json.dumps(event, separators=(",", ":"))

"""Admission control: at most `max_running` responses run at once, `max_queued` more wait (FIFO), the rest get a 429.

A response holds a `Slot` from admission until its run ends, however it ends (`Slot.release` is idempotent;
the service releases it from the run task's done-callback, which runs exactly once even for a task cancelled
before it started). A waiter that is cancelled (its client went away) leaves the queue at once; one granted a
slot just as it was cancelled passes the slot on. `running`, `queued` and `rejected_total` are read by
`/metrics`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque

from vllm_responses.protocol.errors import APIError, Busy

__all__ = ["Admission", "Slot", "default_max_queued"]

# Bounds of the `Retry-After` a 429 carries, in seconds.
RETRY_AFTER_MIN_S = 1
RETRY_AFTER_MAX_S = 60
# Weight of the newest hold time in the running mean `Retry-After` is estimated from.
_EWMA = 0.2


def default_max_queued(max_running: int) -> int:
    """The wait queue's default size: twice the responses that may run at once."""
    return 2 * max_running


class Slot:
    """One admitted response's place among the running ones; `release` gives it back (once, whatever calls it)."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self.admitted_at = time.monotonic()
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._admission._release(self)


class Admission:
    """The admission controller of one server (see the module docstring).

    Parameters
    ----------
    max_running: responses that may run at once (`--max-concurrent-responses`), at least 1.
    max_queued: requests that may wait for a slot (`--max-queued-responses`), at least 0.
    """

    def __init__(self, max_running: int, max_queued: int) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be at least 1, got {max_running}")
        if max_queued < 0:
            raise ValueError(f"max_queued must be at least 0, got {max_queued}")
        self.max_running = max_running
        self.max_queued = max_queued
        self.running = 0
        self.rejected_total = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._mean_hold_s: float | None = None  # running mean of how long a slot is held
        self._closed: APIError | None = None  # set by `close`: every later request gets it

    @property
    def queued(self) -> int:
        return len(self._waiters)

    @property
    def full(self) -> bool:
        """Whether a request arriving now would be refused."""
        return self.running >= self.max_running and len(self._waiters) >= self.max_queued

    def retry_after(self) -> int:
        """Seconds a refused client should wait: about how long until the next running response ends (the
        mean time a slot is held over the slots), 1 to 60."""
        if self._mean_hold_s is None:
            return RETRY_AFTER_MIN_S
        estimate = math.ceil(self._mean_hold_s / self.max_running)
        return max(RETRY_AFTER_MIN_S, min(RETRY_AFTER_MAX_S, estimate))

    def refuse_if_full(self) -> None:
        """Raise the 429 now when a request would be refused anyway (before any work is done for it), or the
        error of `close`."""
        if self._closed is not None:
            raise self._closed
        if self.full:
            raise self._refusal()

    def close(self, error: APIError) -> None:
        """Admit nothing more (shutdown, engine death): the queued requests and every later one get `error`;
        responses already running keep their slots until they end."""
        self._closed = error
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    async def acquire(self) -> Slot:
        """A slot: at once when one is free and nobody waits, else after the requests queued before this one;
        `Busy` (429 with `Retry-After`) when the queue is full too; the error of `close` once closed."""
        if self._closed is not None:
            raise self._closed
        if self.running < self.max_running and not self._waiters:
            self.running += 1
            return Slot(self)
        if len(self._waiters) >= self.max_queued:
            raise self._refusal()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # `_release` hands its slot over by setting the result (`running` unchanged)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                if waiter.exception() is None:  # granted just as it was cancelled: pass it on
                    Slot(self).release()
            else:
                self._waiters.remove(waiter)
            raise
        return Slot(self)

    def _refusal(self) -> Busy:
        self.rejected_total += 1
        wait = self.retry_after()
        return Busy(
            f"This server is at capacity: {self.running} responses running and {len(self._waiters)} waiting "
            f"(--max-concurrent-responses {self.max_running}, --max-queued-responses {self.max_queued}); "
            f"retry after {wait} s.",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(wait)},
        )

    def _release(self, slot: Slot) -> None:
        held = time.monotonic() - slot.admitted_at
        mean = self._mean_hold_s
        self._mean_hold_s = held if mean is None else (1 - _EWMA) * mean + _EWMA * held
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes to the first waiter: `running` stays
                return
        self.running -= 1

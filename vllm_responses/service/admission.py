"""Admission control: at most `max_running` responses run at once, `max_queued` more wait (FIFO), the rest get a 429.

A request's place is decided at once (`reserve`, no await): a `Ticket` that is admitted already, or queued (its
`wait` returns when a slot is handed to it), or a 429. The ticket holds its place, in the queue then among the
running, until `release` (idempotent; the service releases it from the run task's done-callback, which runs
exactly once even for a task cancelled before it started): a queued ticket released (its client went away, its
response was cancelled) leaves the queue at once; an admitted one passes its slot to the first queued ticket.
`running`, `queued` and `rejected_total` are read by `/metrics`; each admission's wait is observed into
`ADMISSION_WAIT` (observe/metrics.py).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from vllm_responses.observe.metrics import ADMISSION_WAIT
from vllm_responses.protocol.errors import APIError, Busy

__all__ = ["Admission", "Ticket", "TokenBudget", "default_max_queued"]

# Bounds of the `Retry-After` a 429 carries, in seconds.
RETRY_AFTER_MIN_S = 1
RETRY_AFTER_MAX_S = 60
# Weight of the newest hold time in the running mean `Retry-After` is estimated from.
_EWMA = 0.2


class TokenBudget(Protocol):
    """A key's tokens per minute, as a response reserves them when it is admitted (api/ratelimit.py)."""

    def reserve(self, tokens: int) -> Callable[[int], None]:
        """Hold `tokens`, or raise the 429 (`Busy`) when they do not fit; the function returned settles the
        hold to the tokens really used, once, when the response ends."""
        ...


def default_max_queued(max_running: int) -> int:
    """The wait queue's default size: twice the responses that may run at once."""
    return 2 * max_running


class Ticket:
    """One accepted request's place (see the module docstring): `admitted` once it holds a running slot."""

    def __init__(self, admission: Admission, *, admitted: bool) -> None:
        self._admission = admission
        self.accepted_at = time.monotonic()
        self.admitted_at: float | None = None
        self.released = False
        self._turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if admitted:
            self._grant()

    @property
    def admitted(self) -> bool:
        return self.admitted_at is not None

    async def wait(self) -> None:
        """Return once admitted; the error of `close` when admission closed while it waited. A cancelled wait
        keeps the place: `release` gives it up."""
        await asyncio.shield(self._turn)

    def release(self) -> None:
        """Give back the place held: leave the queue, or pass the running slot on (once, whatever calls it)."""
        if self.released:
            return
        self.released = True
        if self.admitted:
            self._admission._release(self)
        elif not self._turn.done():
            self._admission._leave(self)
        elif not self._turn.cancelled():
            self._turn.exception()  # refused by `close`: retrieved, whoever waits or not

    def _grant(self) -> None:
        self.admitted_at = time.monotonic()
        if self._admission.metered:
            ADMISSION_WAIT.observe(self.admitted_at - self.accepted_at)
        self._turn.set_result(None)

    def _refuse(self, error: APIError) -> None:
        self._turn.set_exception(error)


class Admission:
    """The admission controller of one server (see the module docstring).

    Parameters
    ----------
    max_running: responses that may run at once (`--max-concurrent-responses`), at least 1.
    max_queued: requests that may wait for a slot (`--max-queued-responses`), at least 0.
    what: what runs, and the flags of its two bounds, as a 429 names them (another kind of request than
        responses has an admission of its own: embeddings).
    metered: whether each admission's wait is observed into `ADMISSION_WAIT` (the responses' admission).
    """

    def __init__(
        self,
        max_running: int,
        max_queued: int,
        what: tuple[str, str, str] = ("responses", "--max-concurrent-responses", "--max-queued-responses"),
        *,
        metered: bool = True,
    ) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be at least 1, got {max_running}")
        if max_queued < 0:
            raise ValueError(f"max_queued must be at least 0, got {max_queued}")
        self.max_running = max_running
        self.max_queued = max_queued
        self.what = what
        self.metered = metered
        self.running = 0
        self.rejected_total = 0
        self._waiters: deque[Ticket] = deque()
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
            self._waiters.popleft()._refuse(error)

    def reserve(self) -> Ticket:
        """A place, decided now: admitted when a slot is free and nobody waits, else queued behind the requests
        queued before it; `Busy` (429 with `Retry-After`) when the queue is full too; the error of `close`
        once closed."""
        if self._closed is not None:
            raise self._closed
        if self.running < self.max_running and not self._waiters:
            self.running += 1
            return Ticket(self, admitted=True)
        if len(self._waiters) >= self.max_queued:
            raise self._refusal()
        ticket = Ticket(self, admitted=False)
        self._waiters.append(ticket)
        return ticket

    async def acquire(self) -> Ticket:
        """`reserve`, then wait for admission (an admitted ticket); a cancelled wait leaves the queue at once."""
        ticket = self.reserve()
        try:
            await ticket.wait()
        except BaseException:
            ticket.release()
            raise
        return ticket

    def _refusal(self) -> Busy:
        self.rejected_total += 1
        wait = self.retry_after()
        noun, running_flag, queued_flag = self.what
        return Busy(
            f"This server is at capacity: {self.running} {noun} running and {len(self._waiters)} waiting "
            f"({running_flag} {self.max_running}, {queued_flag} {self.max_queued}); retry after {wait} s.",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(wait)},
        )

    def _leave(self, ticket: Ticket) -> None:
        self._waiters.remove(ticket)

    def _release(self, ticket: Ticket) -> None:
        assert ticket.admitted_at is not None
        held = time.monotonic() - ticket.admitted_at
        mean = self._mean_hold_s
        self._mean_hold_s = held if mean is None else (1 - _EWMA) * mean + _EWMA * held
        if self._waiters:
            self._waiters.popleft()._grant()  # the slot goes to the first waiter: `running` stays
        else:
            self.running -= 1

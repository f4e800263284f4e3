"""Wake-ups between replicas through Postgres LISTEN/NOTIFY: a replica asked to cancel one of its runs, a
response with new stored events. They only shorten waits that polling already bounds: a lost notice costs
one poll interval, never correctness."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import asyncpg

__all__ = ["CHANNEL", "LocalNotices", "PostgresNotices", "cancel_key", "events_key", "wait_woken"]

logger = logging.getLogger(__name__)

CHANNEL = "vllm_responses"  # one channel; the payload says what for (the keys below)


def cancel_key(replica_id: str) -> str:
    """The notice a replica gets when another asks it to cancel a run (its lease was flagged)."""
    return f"cancel:{replica_id}"


def events_key(response_id: str) -> str:
    """The notice that a background response has new stored events."""
    return f"events:{response_id}"


async def wait_woken(woken: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `woken` is set or `timeout_s` passed; clears it. True when it was set."""
    try:
        await asyncio.wait_for(woken.wait(), timeout_s)
    except TimeoutError:
        return False
    woken.clear()
    return True


class LocalNotices:
    """Waiters by key, each an `asyncio.Event` set by `wake(key)`. Alone (memory and SQLite stores) nothing
    outside this process wakes them, so waits end by their timeouts: polling."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}

    @property
    def listening(self) -> bool:
        """Whether notices from other processes arrive now."""
        return False

    @contextlib.contextmanager
    def waiter(self, key: str) -> Iterator[asyncio.Event]:
        """An event set by every notice `key` while the block runs."""
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            group = self._waiters.get(key)
            if group is not None:
                group.discard(event)
                if not group:
                    del self._waiters[key]

    def wake(self, key: str) -> None:
        for event in self._waiters.get(key, ()):
            event.set()

    def wake_all(self) -> None:
        """Every waiter (notices may have been missed: each reads the store again)."""
        for group in self._waiters.values():
            for event in group:
                event.set()

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class PostgresNotices(LocalNotices):
    """`LocalNotices` woken by `NOTIFY vllm_responses, '<key>'` from any replica, over one connection of its own
    (outside the pool). When that connection drops (a database restart) it is opened again, retrying with
    backoff, and every waiter is woken once it is back; meanwhile the waits fall back to their timeouts."""

    def __init__(self, url: str, *, retry_s: float = 0.5, max_retry_s: float = 15.0) -> None:
        super().__init__()
        self.url = url
        self.retry_s = retry_s
        self.max_retry_s = max_retry_s
        self._conn: Any = None  # asyncpg.Connection while listening
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def start(self) -> None:
        """Listen; a database that cannot be reached now is retried in the background (no error)."""
        try:
            await self._connect()
        except Exception as exc:
            logger.warning(
                "LISTEN %s failed (%r): retrying; cancels and re-streams poll meanwhile", CHANNEL, exc
            )
            self._reconnect_soon()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            await conn.add_listener(CHANNEL, self._on_notice)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._on_lost)
        self._conn = conn

    def _on_notice(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self.wake(payload)

    def _on_lost(self, _conn: object) -> None:
        self._conn = None
        if not self._closed:
            logger.warning("the LISTEN connection to the store was lost: reconnecting")
            self._reconnect_soon()

    def _reconnect_soon(self) -> None:
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_running_loop().create_task(
                self._reconnect(), name="store LISTEN"
            )

    async def _reconnect(self) -> None:
        delay = self.retry_s
        while not self._closed:
            await asyncio.sleep(delay)
            try:
                await self._connect()
            except Exception:
                delay = min(delay * 2, self.max_retry_s)
                continue
            logger.info("listening to the store's notices again")
            self.wake_all()
            return

    async def aclose(self) -> None:
        self._closed = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnecting
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=5)

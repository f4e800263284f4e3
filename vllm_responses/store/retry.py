"""A Postgres store call that meets a lost connection (the server restarted, failed over, or is down) is retried
once on fresh connections; failing again it is a 503 `store_unavailable`, never a 500."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from vllm_responses.protocol.errors import Unavailable

__all__ = ["DISCONNECTS", "retry_on_disconnect"]

logger = logging.getLogger(__name__)

# What asyncpg raises when the connection is gone or the server is going or coming back (not SQL errors).
DISCONNECTS: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.PostgresConnectionError,  # class 08, ConnectionDoesNotExistError included
    asyncpg.exceptions.InterfaceError,  # "connection is closed" and the like
    asyncpg.exceptions.AdminShutdownError,  # 57P01: the server shuts down
    asyncpg.exceptions.CrashShutdownError,  # 57P02
    asyncpg.exceptions.CannotConnectNowError,  # 57P03: the server is starting
    OSError,  # refused, reset (ConnectionError) or timed out connecting
)

T = TypeVar("T")
_NOT_WRAPPED = frozenset({"open", "aclose"})


def _retrying(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except DISCONNECTS as first:
            logger.warning("store call %s lost its connection (%r); retrying once", method.__name__, first)
            pool = getattr(self, "_pool", None)
            if pool is not None:  # every pooled connection may be as dead: replaced on their next use
                await pool.expire_connections()
        try:
            return await method(self, *args, **kwargs)
        except DISCONNECTS as exc:
            raise Unavailable(
                "The response store (database) is unreachable; retry later.", code="store_unavailable"
            ) from exc

    return call


def retry_on_disconnect(cls: type[T]) -> type[T]:
    """Wrap every public coroutine method of `cls` (its bases' included; not `open`/`aclose`): a call that
    raises one of `DISCONNECTS` runs once more, and raises `Unavailable` (503) when it fails again. Each of
    them is one transaction, so running it again is safe (writes are upserts)."""
    for name in dir(cls):
        attr = getattr(cls, name)
        if not name.startswith("_") and name not in _NOT_WRAPPED and inspect.iscoroutinefunction(attr):
            setattr(cls, name, _retrying(attr))
    return cls

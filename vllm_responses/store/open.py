"""The store `--db` names: `store_for` builds it (memory, a SQLite file or Postgres), `open_store` opens it."""

from __future__ import annotations

from pathlib import Path

from vllm_responses.store.base import ResponseStore
from vllm_responses.store.memory import MemoryStore
from vllm_responses.store.migrations import is_postgres_url
from vllm_responses.store.postgres import PostgresStore
from vllm_responses.store.sqlite import SQLiteStore

__all__ = ["open_store", "store_for"]


def store_for(
    db: str | Path, *, max_age_s: float = 30 * 86400, max_rows: int | None = None, pool_size: int = 10
) -> ResponseStore:
    """The store `--db` names, not yet open: `postgresql://...` (or `postgres://...`) a `PostgresStore` with
    at most `pool_size` connections, ":memory:" a `MemoryStore`, anything else a SQLite file."""
    db = str(db)
    if is_postgres_url(db):
        return PostgresStore(db, max_age_s=max_age_s, max_rows=max_rows or 100_000, pool_size=pool_size)
    if db == ":memory:":
        return MemoryStore() if max_rows is None else MemoryStore(max_rows=max_rows)
    return SQLiteStore(db, max_age_s=max_age_s, max_rows=max_rows or 100_000)


async def open_store(db: str | Path, *, pool_size: int = 10) -> ResponseStore:
    """`store_for(db)`, opened (connected and migrated)."""
    store = store_for(db, pool_size=pool_size)
    await store.open()
    return store

"""The chunk index `--db` names, as the store is chosen (store/open.py): `index_for` builds it (a SQLite file or
Postgres), `open_index` opens it."""

from __future__ import annotations

from pathlib import Path

from vllm_responses.retrieval.index import ChunkIndex
from vllm_responses.retrieval.postgres_index import PostgresIndex
from vllm_responses.retrieval.sqlite_index import SQLiteIndex
from vllm_responses.store.migrations import is_postgres_url

__all__ = ["index_for", "open_index"]


def index_for(db: str | Path, *, pool_size: int = 4) -> PostgresIndex | SQLiteIndex:
    """The chunk index in the database `--db` names, not yet open: `postgresql://...` (or `postgres://...`) a
    `PostgresIndex` with at most `pool_size` connections of its own, anything else a `SQLiteIndex` in that file
    (":memory:" one of its own, which nothing else shares)."""
    db = str(db)
    if is_postgres_url(db):
        return PostgresIndex(db, pool_size=pool_size)
    return SQLiteIndex(db)


async def open_index(db: str | Path, *, pool_size: int = 4) -> ChunkIndex:
    """`index_for(db)`, opened (connected, migrated; on Postgres, pgvector found)."""
    index = index_for(db, pool_size=pool_size)
    await index.open()
    return index

"""The chunk table's migrations on a real Postgres: it takes a float32 vector as BYTEA and finds its words through
the generated `tsvector` (migration 9); with pgvector it also has the `vector` extension, an untyped `embedding`
column and statistics on its lengths, and without, none of them (migration 12)."""

from __future__ import annotations

import asyncpg
import numpy as np

from vllm_responses.retrieval.vectors import from_blobs, to_blob, unit_rows
from vllm_responses.store.migrations import upgrade_postgres


async def test_chunks_on_postgres(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        await upgrade_postgres(conn)
        vector = unit_rows([3.0, 4.0])[0]
        await conn.execute(
            "INSERT INTO vector_store_chunks (vector_store_id, file_id, chunk_index, text, attributes, vector) "
            "VALUES ('vs_1', 'file-1', 0, 'Three cars were parked', '{}', $1)",
            to_blob(vector),
        )
        await conn.execute(
            "INSERT INTO vector_store_generations VALUES ('vs_1', 1) ON CONFLICT (vector_store_id) "
            "DO UPDATE SET generation = vector_store_generations.generation + 1"
        )
        row = await conn.fetchrow(
            "SELECT file_id, vector FROM vector_store_chunks WHERE words @@ plainto_tsquery('english', 'car')"
        )
        assert row is not None and row["file_id"] == "file-1"
        assert np.array_equal(from_blobs([row["vector"]], 2)[0], np.array([0.6, 0.8], dtype=np.float32))
    finally:
        await conn.close()


async def columns_and_extension(url: str) -> tuple[set[str], str | None, int]:
    conn = await asyncpg.connect(url)
    try:
        await upgrade_postgres(conn)
        columns = {
            r[0]
            for r in await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'vector_store_chunks'"
            )
        }
        version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        stats = await conn.fetchval(
            "SELECT count(*) FROM pg_statistic_ext WHERE stxname = 'vector_store_chunks_dims'"
        )
    finally:
        await conn.close()
    return columns, version, int(stats)


async def test_migration_11_with_and_without_pgvector(pg_url: str, pgvector_url: str) -> None:
    columns, version, stats = await columns_and_extension(pgvector_url)
    assert "embedding" in columns and version == "0.8.5" and stats == 1
    columns, version, stats = await columns_and_extension(pg_url)  # Debian's Postgres: no pgvector
    assert "embedding" not in columns and "vector" in columns and version is None and stats == 0

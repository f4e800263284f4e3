"""Migration 8 on a real Postgres: the chunk table takes a float32 vector as BYTEA and finds its words through
the generated `tsvector` (search on Postgres is not served yet; the schema is the same version as SQLite's)."""

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

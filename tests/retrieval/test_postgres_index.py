"""The Postgres chunk index beyond the contract (test_chunk_index.py): searches go through the HNSW index of their
vector length, whose recall@10 on random vectors stays near exact search's; a database whose role could not create
the extension searches exactly until an operator creates it, and the next index open fills the vector column."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest

from vllm_responses.retrieval import postgres_index
from vllm_responses.retrieval.index import Query
from vllm_responses.retrieval.pgvector import (
    HNSW_MIN_CHUNKS,
    Pgvector,
    ef_search,
    encode,
    nearest_sql,
    search_settings,
    use_hnsw,
)
from vllm_responses.retrieval.postgres_index import PostgresIndex
from vllm_responses.retrieval.ranking import Ranking
from vllm_responses.retrieval.vectors import candidates, unit_rows

VECTOR = Ranking(ranker="none")  # the vector list alone, scored by cosine similarity


def random_unit(n: int, dimensions: int, seed: int) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).standard_normal((n, dimensions)))


async def plan_of(url: str, dimensions: int, store: str, *, hnsw: bool) -> str:
    """Postgres's plan for the vector search of one whole vector store under the settings `PostgresIndex` gives
    it (`hnsw`: through the HNSW index, else an exact sort), once the table is analyzed."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ANALYZE vector_store_chunks")
        await conn.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
        version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        async with conn.transaction():
            await search_settings(conn, 64, Pgvector(version), hnsw)
            sql = nearest_sql(dimensions, "vector_store_id = ANY($3::text[])", "$2")
            rows = await conn.fetch("EXPLAIN " + sql, encode(random_unit(1, dimensions, 9)[0]), 64, [store])
    finally:
        await conn.close()
    return "\n".join(r[0] for r in rows)


@pytest.mark.slow  # 10,000 HNSW inserts: about 30 s on two cores
async def test_hnsw_recall_at_10_on_10k_random_vectors(
    pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 random 384-dimension vectors (MiniLM's length; random vectors are HNSW's hard case): the searches go
    through the HNSW index, and the 10 nearest it finds for 50 queries hold >= 95% of the exact 10 nearest."""
    dimensions, n = 384, 10_000
    vectors = random_unit(n, dimensions, 1)
    through_hnsw: list[bool] = []

    async def settings(conn: object, limit: int, pgvector: Pgvector, hnsw: bool) -> None:
        through_hnsw.append(hnsw)
        await search_settings(conn, limit, pgvector, hnsw)

    monkeypatch.setattr(postgres_index, "search_settings", settings)
    async with PostgresIndex(pgvector_url) as idx:
        assert idx.pgvector is not None
        for start in range(0, n, 500):
            rows = vectors[start : start + 500]
            await idx.add_file(
                "vs_1", f"file-{start:05}", [f"chunk {start + i}" for i in range(len(rows))], rows, {}
            )
        assert "vector_store_chunks_hnsw_384" in await plan_of(pgvector_url, dimensions, "vs_1", hnsw=True)
        queries = random_unit(50, dimensions, 2)
        found = 0
        for query in queries:
            exact = set(np.argsort(-(vectors @ query))[:10].tolist())
            hits = await idx.search(["vs_1"], Query("", query), ranking=VECTOR, max_num_results=10)
            found += len(exact & {int(h.text.split()[1]) for h in hits})
    assert through_hnsw == [True] * len(queries)
    assert found / (10 * len(queries)) >= 0.95
    assert candidates(10) <= ef_search(candidates(10))  # the scan keeps at least the candidates asked for


def test_which_searches_go_through_hnsw() -> None:
    """A few chunks, or a small share of a large table, are sorted exactly; the rest searched by HNSW."""
    assert not use_hnsw(HNSW_MIN_CHUNKS - 1, -1) and use_hnsw(HNSW_MIN_CHUNKS, -1)  # never analysed
    assert use_hnsw(10_000, 10_000) and use_hnsw(10_000, 100_000) and not use_hnsw(10_000, 100_001)


async def test_the_hnsw_index_serves_each_vector_length(pgvector_url: str) -> None:
    """Vector stores of two embedding models (8 and 16 dimensions) share the table; each length has its index,
    which its searches' plans use (when the index decides for HNSW; an exact sort otherwise)."""
    async with PostgresIndex(pgvector_url) as idx:
        await idx.add_file("vs_8", "file-1", ["a", "b"], random_unit(2, 8, 3), {})
        await idx.add_file("vs_16", "file-2", ["c", "d"], random_unit(2, 16, 4), {})
        hits = await idx.search(["vs_16"], Query("", random_unit(1, 16, 5)[0]), ranking=VECTOR)
        assert {h.file_id for h in hits} <= {"file-2"}
    conn = await asyncpg.connect(pgvector_url)
    try:
        names = {
            r[0] for r in await conn.fetch("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%hnsw%'")
        }
        assert names == {"vector_store_chunks_hnsw_8", "vector_store_chunks_hnsw_16"}
    finally:
        await conn.close()
    assert "vector_store_chunks_hnsw_16" in await plan_of(pgvector_url, 16, "vs_16", hnsw=True)
    assert "vector_store_chunks_hnsw_8" in await plan_of(pgvector_url, 8, "vs_8", hnsw=True)
    assert "hnsw" not in await plan_of(pgvector_url, 8, "vs_8", hnsw=False)  # an exact sort


async def test_without_the_privilege_exact_until_an_operator_creates_the_extension(pgvector_url: str) -> None:
    """A role that may not create the extension (it is not a trusted one) migrates the database all the same and
    searches exactly; once a superuser creates it, the next open adds the vector column, fills it from the kept
    vectors, and searches by HNSW, finding the same chunks."""
    name = pgvector_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(pgvector_url)
    try:
        await admin.execute("CREATE ROLE app LOGIN")
        await admin.execute(f"ALTER DATABASE {name} OWNER TO app")
        await admin.execute("ALTER SCHEMA public OWNER TO app")
    finally:
        await admin.close()
    app_url = pgvector_url.replace("postgres@", "app@", 1)
    vectors = random_unit(40, 8, 6)
    query = Query("", vectors[7])
    async with PostgresIndex(app_url) as idx:
        assert idx.pgvector is None
        await idx.add_file("vs_1", "file-1", [f"chunk {i}" for i in range(40)], vectors, {"k": 1})
        exact = [(h.chunk_index, h.score) for h in await idx.search(["vs_1"], query, ranking=VECTOR)]
    assert exact[0] == (7, 1.0)
    admin = await asyncpg.connect(pgvector_url)
    try:
        await admin.execute("CREATE EXTENSION vector")
    finally:
        await admin.close()
    async with PostgresIndex(app_url) as idx:
        assert idx.pgvector is not None
        by_index = [(h.chunk_index, h.score) for h in await idx.search(["vs_1"], query, ranking=VECTOR)]
        await idx.add_file("vs_1", "file-2", ["more"], random_unit(1, 8, 7), {})  # its HNSW index made now
    assert [i for i, _ in by_index] == [i for i, _ in exact]
    assert np.allclose([s for _, s in by_index], [s for _, s in exact], atol=1e-5)  # float32 sums either way
    conn = await asyncpg.connect(app_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM vector_store_chunks WHERE embedding IS NULL") == 0
    finally:
        await conn.close()

"""The Postgres chunk index beyond the contract (test_chunk_index.py): searches go through the HNSW index of their
vector length, whose recall@10 on random vectors stays near exact search's; a database whose role could not create
the extension searches exactly until an operator creates it, and the next index open fills the vector column."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest

from vllm_responses.retrieval.index import Query
from vllm_responses.retrieval.pgvector import ef_search, encode, nearest_sql
from vllm_responses.retrieval.postgres_index import PostgresIndex
from vllm_responses.retrieval.ranking import Ranking
from vllm_responses.retrieval.vectors import candidates, unit_rows

VECTOR = Ranking(ranker="none")  # the vector list alone, scored by cosine similarity


def random_unit(n: int, dimensions: int, seed: int) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).standard_normal((n, dimensions)))


async def set_for_database(url: str, setting: str, value: str) -> None:
    """A setting for the database's new connections (those of an index opened after)."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"ALTER DATABASE {url.rsplit('/', 1)[1]} SET {setting} = {value}")
    finally:
        await conn.close()


async def plan_of(url: str, dimensions: int, store: str) -> str:
    """Postgres's plan for the vector search of one whole vector store, as `PostgresIndex` runs it, once the table
    is analyzed (as autovacuum does after enough writes)."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ANALYZE vector_store_chunks")
        await conn.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
        async with conn.transaction():
            await conn.execute("SELECT set_config('hnsw.ef_search', $1, true)", str(ef_search(64)))
            sql = nearest_sql(dimensions, "vector_store_id = ANY($3::text[])", "$2")
            rows = await conn.fetch("EXPLAIN " + sql, encode(random_unit(1, dimensions, 9)[0]), 64, [store])
    finally:
        await conn.close()
    return "\n".join(r[0] for r in rows)


@pytest.mark.slow  # 10,000 HNSW inserts: about 30 s on two cores
async def test_hnsw_recall_at_10_on_10k_random_vectors(pgvector_url: str) -> None:
    """10,000 random 384-dimension vectors (MiniLM's length; random vectors are HNSW's hard case): the 10 nearest
    that the index finds for 50 queries hold >= 95% of the exact 10 nearest. At this size the planner would rather
    sort every row (exact, and cheaper than a scan keeping 800 candidates): sorting is turned off for the database,
    and the plan checked to be the index's."""
    dimensions, n = 384, 10_000
    vectors = random_unit(n, dimensions, 1)
    await set_for_database(pgvector_url, "enable_sort", "off")
    async with PostgresIndex(pgvector_url) as idx:
        assert idx.pgvector is not None
        for start in range(0, n, 500):
            rows = vectors[start : start + 500]
            await idx.add_file(
                "vs_1", f"file-{start:05}", [f"chunk {start + i}" for i in range(len(rows))], rows, {}
            )
        assert "vector_store_chunks_hnsw_384" in await plan_of(pgvector_url, dimensions, "vs_1")
        queries = random_unit(50, dimensions, 2)
        found = 0
        for query in queries:
            exact = set(np.argsort(-(vectors @ query))[:10].tolist())
            hits = await idx.search(["vs_1"], Query("", query), ranking=VECTOR, max_num_results=10)
            found += len(exact & {int(h.text.split()[1]) for h in hits})
    assert found / (10 * len(queries)) >= 0.95
    assert candidates(10) <= ef_search(candidates(10))  # the scan keeps at least the candidates asked for


async def test_the_hnsw_index_serves_each_vector_length(pgvector_url: str) -> None:
    """Vector stores of two embedding models (8 and 16 dimensions) share the table; each length has its index,
    which its searches' plans use (sorting off: the tables are small)."""
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
    await set_for_database(pgvector_url, "enable_sort", "off")  # tiny tables: the planner would sort them
    assert "vector_store_chunks_hnsw_16" in await plan_of(pgvector_url, 16, "vs_16")
    assert "vector_store_chunks_hnsw_8" in await plan_of(pgvector_url, 8, "vs_8")


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

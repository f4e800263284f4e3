"""pgvector on the chunk table (migration 12): whether a database has it, its binary vector format, the HNSW index
of each vector length, and the column added (and filled from the BYTEA vectors) once the extension exists.

Vectors of every length share the untyped column `embedding`; an HNSW index holds one length only, so each length
N gets its own partial index on the expression `embedding::vector(N)` over the rows `vector_dims(embedding) = N`,
which a search for a query of length N names in the same words (see `nearest_sql`)."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from vllm_responses.retrieval.vectors import Matrix, from_blobs

__all__ = [
    "EF_SEARCH",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "HNSW_MIN_CHUNKS",
    "HNSW_MIN_SHARE",
    "MAX_HNSW_DIMENSIONS",
    "Pgvector",
    "encode",
    "ensure_hnsw",
    "ef_search",
    "nearest_sql",
    "pgvector_of",
    "register_codec",
    "search_settings",
    "use_hnsw",
]

logger = logging.getLogger(__name__)

HNSW_M = 16  # pgvector's default: links per node
# candidates kept while building (pgvector's default: 64): better recall, slower inserts
HNSW_EF_CONSTRUCTION = 128
EF_SEARCH = 800  # an HNSW scan's candidates, at least (`ef_search`)
HNSW_MIN_CHUNKS = 2000  # a search over fewer chunks sorts them exactly (`use_hnsw`)
HNSW_MIN_SHARE = 0.1  # nor over a smaller share of the table (an HNSW scan would wade through the others)
# pgvector's HNSW limit for `vector`; longer vectors are sorted exactly by Postgres
MAX_HNSW_DIMENSIONS = 2000
_BACKFILL_BATCH = 1000
_LOCK_KEY = int.from_bytes(b"vrpgvect", "big") & 0x7FFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class Pgvector:
    """The database's pgvector: its version and whether it scans iteratively under a filter (0.8 and later)."""

    version: str

    @property
    def iterative_scan(self) -> bool:
        return tuple(int(p) for p in self.version.split(".")[:2] if p.isdigit()) >= (0, 8)


def ef_search(limit: int) -> int:
    """`hnsw.ef_search` for a search of `limit` candidates: how many an HNSW scan keeps. pgvector's default, 40,
    returns at most 40 and misses many of the true nearest; on 10,000 random 384-dimension vectors (HNSW's hard
    case) recall@10 is 0.80 at 200, 0.96 at 400 and 0.99 at 800 (docs/benchmarks.md). pgvector's maximum is 1000."""
    return min(1000, max(EF_SEARCH, 2 * limit))


def use_hnsw(chunks_in_scope: int, table_rows: float) -> bool:
    """Whether a vector search over `chunks_in_scope` chunks goes through the HNSW index rather than an exact
    sort, the table holding about `table_rows` (Postgres's estimate, below 0 when never analysed). Postgres's
    planner prices an HNSW scan keeping 800 candidates above sorting 10,000 rows, which takes it several times
    longer (docs/benchmarks.md): the index decides instead. A few chunks are sorted faster than searched; a
    small share of a large table is too (a filtered HNSW scan would pass over the other rows' neighbours)."""
    if chunks_in_scope < HNSW_MIN_CHUNKS:
        return False
    return table_rows <= 0 or chunks_in_scope >= HNSW_MIN_SHARE * table_rows


async def search_settings(conn: Any, limit: int, pgvector: Pgvector, hnsw: bool) -> None:
    """A vector search's settings for its transaction: `hnsw.ef_search` for `limit` candidates; with pgvector 0.8
    or later an iterative scan in exact order (a filtered scan goes on until it has `limit` chunks); with `hnsw`
    no sort, so that the planner takes the HNSW index, else no HNSW scan, so that it sorts exactly."""
    await conn.execute("SELECT set_config('hnsw.ef_search', $1, true)", str(ef_search(limit)))
    if pgvector.iterative_scan:
        await conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
    await conn.execute("SELECT set_config($1, 'off', true)", "enable_sort" if hnsw else "enable_indexscan")


def encode(vector: Matrix) -> bytes:
    """One vector in pgvector's binary format: its length, a reserved zero, then big-endian float32s."""
    return struct.pack(">HH", len(vector), 0) + np.asarray(vector, dtype=">f4").tobytes()


async def register_codec(conn: Any) -> None:
    """asyncpg sends `vector` parameters in the binary format, as bytes we encode (`encode`); a database without
    the extension has no such type: nothing to register."""
    schema = await conn.fetchval(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    )
    if schema is not None:
        await conn.set_type_codec("vector", schema=schema, encoder=bytes, decoder=bytes, format="binary")


async def pgvector_of(conn: Any) -> Pgvector | None:
    """The database's pgvector when the extension and the `embedding` column are there (the column is added, and
    filled from the BYTEA vectors, when only the extension is); None otherwise."""
    version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    if version is None:
        return None
    if not await _has_column(conn):
        await _add_column(conn)
    return Pgvector(str(version))


async def _has_column(conn: Any) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'vector_store_chunks' "
            "AND column_name = 'embedding' AND table_schema = current_schema())"
        )
    )


async def _add_column(conn: Any) -> None:
    """The `embedding` column, added under a lock (replicas starting at once) and filled in batches."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        await conn.execute("ALTER TABLE vector_store_chunks ADD COLUMN IF NOT EXISTS embedding vector")
        await conn.execute(
            "CREATE STATISTICS IF NOT EXISTS vector_store_chunks_dims ON (vector_dims(embedding)) "
            "FROM vector_store_chunks"
        )
    await register_codec(conn)
    filled = 0
    while True:
        rows = await conn.fetch(
            "SELECT id, vector FROM vector_store_chunks WHERE embedding IS NULL ORDER BY id LIMIT $1",
            _BACKFILL_BATCH,
        )
        if not rows:
            break
        vectors = [from_blobs([r["vector"]], len(r["vector"]) // 4)[0] for r in rows]
        await conn.executemany(
            "UPDATE vector_store_chunks SET embedding = $2 WHERE id = $1",
            [(r["id"], encode(v)) for r, v in zip(rows, vectors, strict=True)],
        )
        filled += len(rows)
    logger.info("pgvector: the embedding column added, %d chunks' vectors copied into it", filled)


async def ensure_hnsw(conn: Any, dimensions: int) -> bool:
    """The HNSW index of vectors of `dimensions` (cosine distance), created unless it exists; False for a length
    HNSW cannot index (searched exactly by Postgres)."""
    if dimensions > MAX_HNSW_DIMENSIONS:
        return False
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS vector_store_chunks_hnsw_{dimensions} ON vector_store_chunks "
            f"USING hnsw ((embedding::vector({dimensions})) vector_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
            f"WHERE vector_dims(embedding) = {dimensions}"
        )
    return True


def nearest_sql(dimensions: int, scope: str, limit_param: str) -> str:
    """The chunks within `scope` (SQL over the chunk table) nearest to the query vector `$1` of `dimensions`, in
    the words of that length's HNSW index (so that the planner may use it): (id, cosine similarity)."""
    d = int(dimensions)
    distance = f"embedding::vector({d}) <=> $1::vector({d})"
    return (
        f"SELECT id, 1 - ({distance}) AS similarity FROM vector_store_chunks "
        f"WHERE vector_dims(embedding) = {d} AND ({scope}) ORDER BY {distance} LIMIT {limit_param}"
    )

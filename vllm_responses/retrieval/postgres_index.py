"""`PostgresIndex`, the chunk index in the store's Postgres database: chunks in `vector_store_chunks`, their words in
the generated `tsvector` (ranked by `ts_rank_cd`), their vectors searched by pgvector's HNSW index where the
database has the extension (pgvector.py), else exactly in a numpy matrix per vector store, as `SQLiteIndex` does.

The file is organized as: 1. opening (the schema migrated, pgvector found, then a pool of its own); 2. writes,
each one transaction under the vector store's advisory lock that also raises its generation; 3. each vector
store's catalogue (its files and their attributes, and for the exact search its vectors), loaded on its first
search and again once its generation has moved (a change by this replica or another); 4. search: filters first
(the files they let through, as SQL), then the vector and keyword lists among those files only, fused
(ranking.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt

from vllm_responses.executors import SEARCH, run_on
from vllm_responses.retrieval.attributes import Attributes
from vllm_responses.retrieval.filters import Filter
from vllm_responses.retrieval.index import Hit, Query, StoredChunk, VectorDimensionsDiffer
from vllm_responses.retrieval.keywords import tsquery
from vllm_responses.retrieval.pgvector import (
    Pgvector,
    encode,
    ensure_hnsw,
    nearest_sql,
    pgvector_of,
    register_codec,
    search_settings,
    use_hnsw,
)
from vllm_responses.retrieval.ranking import DEFAULT_RANKING, Ranking, plan, ranked
from vllm_responses.retrieval.vectors import (
    Matrix,
    StoreMatrix,
    candidates,
    matrix_of_rows,
    nearest_in,
    to_blob,
    unit_rows,
)
from vllm_responses.store.migrations import upgrade_postgres
from vllm_responses.store.retry import retry_on_disconnect

__all__ = ["PostgresIndex"]

logger = logging.getLogger(__name__)

_BUMP = (
    "INSERT INTO vector_store_generations (vector_store_id, generation) VALUES ($1, 1) "
    "ON CONFLICT (vector_store_id) DO UPDATE SET generation = vector_store_generations.generation + 1"
)
_LOCK_STORE = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
_WHERE_FILE = "WHERE vector_store_id = $1 AND file_id = $2"


@retry_on_disconnect
class PostgresIndex:
    """The chunk index (`ChunkIndex`) in a Postgres database, on a pool of its own. `pgvector=False` searches
    vectors exactly even where the extension is (for comparison); `pgvector` says which search runs once open."""

    def __init__(
        self, url: str, *, pool_size: int = 4, max_cached_bytes: int = 1 << 30, pgvector: bool = True
    ) -> None:
        self.url = url
        self.pool_size = pool_size
        self.max_cached_bytes = max_cached_bytes
        self.use_pgvector = pgvector
        self.pgvector: Pgvector | None = None
        self._pool: asyncpg.Pool | None = None
        self._stores: OrderedDict[str, tuple[int, StoreMatrix, dict[str, int]]] = OrderedDict()
        self._hnsw: set[int] = set()  # vector lengths whose HNSW index this process has seen to

    # 1. opening

    async def open(self) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            await upgrade_postgres(conn)
            found = await pgvector_of(conn) if self.use_pgvector else None
        finally:
            await conn.close()
        self.pgvector = found
        if found is not None:
            logger.info("chunk index on Postgres: pgvector %s, HNSW vector search", found.version)
        else:
            logger.info(
                "chunk index on Postgres: exact vector search (%s)",
                "pgvector off" if not self.use_pgvector else "no pgvector: CREATE EXTENSION vector to use it",
            )
        self._pool = await asyncpg.create_pool(
            self.url, min_size=1, max_size=self.pool_size, init=register_codec if found else None
        )

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        self._stores.clear()

    async def __aenter__(self) -> PostgresIndex:
        await self.open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the index is not open")
        return self._pool

    # 2. writes

    async def add_file(
        self,
        vector_store_id: str,
        file_id: str,
        chunks: Sequence[str],
        vectors: npt.ArrayLike,
        attributes: Attributes,
    ) -> None:
        rows = unit_rows(vectors) if len(chunks) else np.zeros((0, 0), dtype=np.float32)
        if len(rows) != len(chunks):
            raise ValueError(f"{len(chunks)} chunks but {len(rows)} vectors")
        attrs = json.dumps(attributes)
        # Postgres's text holds no NUL character: one read from a file is kept as U+FFFD
        values = [
            (vector_store_id, file_id, i, t.replace("\x00", "\ufffd"), attrs, to_blob(v))
            + ((encode(v),) if self.pgvector else ())
            for i, (t, v) in enumerate(zip(chunks, rows, strict=True))
        ]
        columns = "vector_store_id, file_id, chunk_index, text, attributes, vector"
        marks = "$1, $2, $3, $4, $5, $6"
        if self.pgvector:
            columns, marks = columns + ", embedding", marks + ", $7"
        async with self.pool.acquire() as conn:
            if self.pgvector and len(rows) and rows.shape[1] not in self._hnsw:
                await ensure_hnsw(conn, rows.shape[1])
                self._hnsw.add(rows.shape[1])
            async with conn.transaction():
                await conn.execute(_LOCK_STORE, vector_store_id)
                if len(rows):
                    await _check_dimensions(conn, vector_store_id, file_id, rows.shape[1])
                await conn.execute(f"DELETE FROM vector_store_chunks {_WHERE_FILE}", vector_store_id, file_id)
                if values:
                    await conn.executemany(
                        f"INSERT INTO vector_store_chunks ({columns}) VALUES ({marks})", values
                    )
                await conn.execute(_BUMP, vector_store_id)

    async def _write(self, vector_store_id: str, sql: str, *params: Any) -> int:
        """One statement in a transaction that raises the vector store's generation; its row count."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(_LOCK_STORE, vector_store_id)
            status = await conn.execute(sql, *params)
            await conn.execute(_BUMP, vector_store_id)
        return int(status.rsplit(" ", 1)[-1])

    async def set_attributes(self, vector_store_id: str, file_id: str, attributes: Attributes) -> bool:
        sql = "UPDATE vector_store_chunks SET attributes = $3 " + _WHERE_FILE
        return await self._write(vector_store_id, sql, vector_store_id, file_id, json.dumps(attributes)) > 0

    async def delete_file(self, vector_store_id: str, file_id: str) -> int:
        sql = f"DELETE FROM vector_store_chunks {_WHERE_FILE}"
        return await self._write(vector_store_id, sql, vector_store_id, file_id)

    async def delete_store(self, vector_store_id: str) -> int:
        # its generation row stays (raised once more), so that no generation of it is ever seen twice
        sql = "DELETE FROM vector_store_chunks WHERE vector_store_id = $1"
        return await self._write(vector_store_id, sql, vector_store_id)

    async def file_chunks(self, vector_store_id: str, file_id: str) -> list[StoredChunk]:
        rows = await self.pool.fetch(
            f"SELECT chunk_index, text FROM vector_store_chunks {_WHERE_FILE} ORDER BY chunk_index",
            vector_store_id,
            file_id,
        )
        return [StoredChunk(int(i), str(t)) for i, t in rows]

    # 3. the catalogues

    async def _catalogue(self, vector_store_id: str, generation: int) -> tuple[StoreMatrix, dict[str, int]]:
        """The vector store's files and attributes (and, for the exact search, its vectors; with pgvector, each
        file's chunk count), loaded unless the one held is of `generation`."""
        held = self._stores.get(vector_store_id)
        if held is not None and held[0] == generation:
            self._stores.move_to_end(vector_store_id)
            return held[1], held[2]
        counts: dict[str, int] = {}
        if self.pgvector:
            rows = await self.pool.fetch(
                "SELECT file_id, min(attributes), min(octet_length(vector)), count(*) FROM vector_store_chunks "
                "WHERE vector_store_id = $1 GROUP BY file_id",
                vector_store_id,
            )
            loaded = _files_only(rows)
            counts = {str(r[0]): int(r[3]) for r in rows}
        else:
            rows = await self.pool.fetch(
                "SELECT id, file_id, attributes, vector FROM vector_store_chunks WHERE vector_store_id = $1 "
                "ORDER BY id",
                vector_store_id,
            )
            loaded = await run_on(SEARCH, matrix_of_rows, rows)
        self._stores[vector_store_id] = (generation, loaded, counts)
        self._stores.move_to_end(vector_store_id)
        while (
            len(self._stores) > 1 and sum(h[1].nbytes for h in self._stores.values()) > self.max_cached_bytes
        ):
            self._stores.popitem(last=False)
        return loaded, counts

    # 4. search

    async def search(
        self,
        vector_store_ids: Sequence[str],
        query: Query,
        *,
        filters: Filter | None = None,
        ranking: Ranking = DEFAULT_RANKING,
        max_num_results: int = 10,
    ) -> list[Hit]:
        if not vector_store_ids:
            return []
        generations = await self.pool.fetch(
            "SELECT vector_store_id, generation FROM vector_store_generations WHERE vector_store_id = ANY($1)",
            list(vector_store_ids),
        )
        catalogues = {str(s): await self._catalogue(str(s), int(g)) for s, g in generations}
        stores = {s: m for s, (m, _) in catalogues.items()}
        allowed = {s: m.allowed_files(filters) for s, m in stores.items()}
        in_scope = sum(catalogues[s][1].get(f, 0) for s, files in allowed.items() for f in files)
        if not any(allowed.values()):
            return []
        limit = candidates(max_num_results)
        vector = None if query.vector is None else unit_rows(query.vector)
        ranking, by_vector, by_text = plan(ranking, vector is not None)
        nearest, words = await asyncio.gather(
            self._nearest(stores, allowed, vector, limit, in_scope) if by_vector else _nothing(),
            self._keywords(stores, allowed, query.text, limit) if by_text else _nothing(),
        )
        return await self._hits(ranked(nearest, words, ranking, max_num_results))

    async def _nearest(
        self,
        stores: dict[str, StoreMatrix],
        allowed: dict[str, list[str]],
        vector: Matrix | None,
        limit: int,
        in_scope: int,
    ) -> list[tuple[int, float]]:
        """The `limit` chunks of the allowed files (`in_scope` chunks) nearest to `vector` (cosine similarity above
        0, best first)."""
        assert vector is not None
        if self.pgvector is None:
            return await run_on(SEARCH, nearest_in, stores, allowed, vector, limit)
        dimensions = vector.shape[-1]
        for store, matrix in stores.items():
            if allowed[store] and matrix.dimensions != dimensions:
                raise VectorDimensionsDiffer(
                    f"the query has {dimensions} dimensions, the vector store's chunks {matrix.dimensions}"
                )
        scope, params = _scope(stores, allowed, first=3)
        async with self.pool.acquire() as conn, conn.transaction():
            rows_estimate = await conn.fetchval(
                "SELECT reltuples FROM pg_class WHERE oid = 'vector_store_chunks'::regclass"
            )
            await search_settings(conn, limit, self.pgvector, use_hnsw(in_scope, float(rows_estimate)))
            rows = await conn.fetch(nearest_sql(dimensions, scope, "$2"), encode(vector[0]), limit, *params)
        found = [(int(r[0]), float(r[1])) for r in rows if r[1] > 0]  # no likeness at all: not found
        return sorted(found, key=lambda h: (-h[1], h[0]))

    async def _keywords(
        self, stores: dict[str, StoreMatrix], allowed: dict[str, list[str]], text: str, limit: int
    ) -> list[int]:
        """The chunks of the allowed files holding any word of `text`, best `ts_rank_cd` first."""
        match = tsquery(text)
        if match is None:
            return []
        scope, params = _scope(stores, allowed, first=3)
        rows = await self.pool.fetch(
            "SELECT id FROM vector_store_chunks, to_tsquery('english', $1) AS q "
            f"WHERE words @@ q AND ({scope}) ORDER BY ts_rank_cd(words, q) DESC, id LIMIT $2",
            match,
            limit,
            *params,
        )
        return [int(r[0]) for r in rows]

    async def _hits(self, scored: list[tuple[int, float]]) -> list[Hit]:
        if not scored:
            return []
        found = await self.pool.fetch(
            "SELECT id, vector_store_id, file_id, chunk_index, text, attributes FROM vector_store_chunks "
            "WHERE id = ANY($1::bigint[])",
            [c for c, _ in scored],
        )
        rows = {int(r[0]): r for r in found}
        return [
            Hit(str(r[1]), str(r[2]), int(r[3]), str(r[4]), json.loads(r[5]), round(score, 6))
            for c, score in scored
            if (r := rows.get(c)) is not None  # a chunk removed since the lists were made is left out
        ]


async def _nothing() -> list[Any]:
    return []


async def _check_dimensions(conn: Any, vector_store_id: str, file_id: str, dimensions: int) -> None:
    length = await conn.fetchval(
        "SELECT octet_length(vector) FROM vector_store_chunks WHERE vector_store_id = $1 AND file_id != $2 LIMIT 1",
        vector_store_id,
        file_id,
    )
    if length is not None and length != 4 * dimensions:
        raise VectorDimensionsDiffer(
            f"vectors of {dimensions} dimensions, but the vector store's have {length // 4}"
        )


def _files_only(rows: Sequence[Any]) -> StoreMatrix:
    """Rows of (file id, attributes as JSON, vector bytes) as a `StoreMatrix` of no rows: the vector store's files,
    their attributes and its vectors' length (pgvector holds the vectors)."""
    dimensions = int(rows[0][2]) // 4 if rows else 0
    return StoreMatrix(
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int32),
        [str(r[0]) for r in rows],
        [json.loads(r[1]) for r in rows],
        np.zeros((0, dimensions), dtype=np.float32),
    )


def _scope(
    stores: dict[str, StoreMatrix], allowed: dict[str, list[str]], first: int
) -> tuple[str, list[Any]]:
    """SQL keeping the chunks of the allowed files (a whole vector store when every file of it is), with its
    parameters numbered from `first`."""
    whole = [s for s, files in allowed.items() if files and len(files) == len(stores[s].files)]
    some = [(s, f) for s, files in allowed.items() if s not in whole for f in files]
    terms: list[str] = []
    params: list[Any] = []
    if whole:
        terms.append(f"vector_store_id = ANY(${first}::text[])")
        params.append(whole)
    if some:
        n = first + len(params)
        terms.append(
            f"(vector_store_id, file_id) IN (SELECT s, f FROM unnest(${n}::text[], ${n + 1}::text[]) AS a (s, f))"
        )
        params += [[s for s, _ in some], [f for _, f in some]]
    return " OR ".join(terms), params

"""`SQLiteIndex`, the chunk index in the store's SQLite file: chunks in `vector_store_chunks`, their words in
FTS5 (BM25), their vectors searched exactly in a numpy matrix per vector store.

The file is organized as: 1. opening (its own connection, the schema migrated); 2. writes, each one
transaction that also raises the vector store's generation; 3. the matrices, loaded on a store's first search
and again once its generation has moved (a change by this process or by another replica), least recently used
dropped past `max_cached_bytes`; 4. search: filters first (the files they let through), then the vector and
keyword lists among those files only, fused (ranking.py).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import numpy as np
import numpy.typing as npt

from vllm_responses.executors import SEARCH, run_on
from vllm_responses.retrieval.attributes import Attributes
from vllm_responses.retrieval.filters import Filter
from vllm_responses.retrieval.index import Hit, Query, StoredChunk, VectorDimensionsDiffer
from vllm_responses.retrieval.keywords import fts_query
from vllm_responses.retrieval.ranking import DEFAULT_RANKING, Ranking, plan, ranked
from vllm_responses.retrieval.vectors import (
    CANDIDATES,
    StoreMatrix,
    candidates,
    matrix_of_rows,
    nearest_in,
    to_blob,
    unit_rows,
)
from vllm_responses.store.migrations import upgrade_sqlite

__all__ = ["CANDIDATES", "SQLiteIndex"]

_DELETE_WORDS = (
    "INSERT INTO vector_store_chunks_fts (vector_store_chunks_fts, rowid, text) "
    "SELECT 'delete', id, text FROM vector_store_chunks WHERE "
)
_BUMP = (
    "INSERT INTO vector_store_generations (vector_store_id, generation) VALUES (?, 1) "
    "ON CONFLICT (vector_store_id) DO UPDATE SET generation = generation + 1"
)


class SQLiteIndex:
    """The chunk index (`ChunkIndex`) in a SQLite file (or ":memory:"), on a connection of its own."""

    def __init__(self, path: str | Path, *, max_cached_bytes: int = 1 << 30) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path).expanduser())
        self.max_cached_bytes = max_cached_bytes
        self._db: aiosqlite.Connection | None = None
        self._matrices: OrderedDict[str, tuple[int, StoreMatrix]] = OrderedDict()
        # one statement or transaction at a time on the connection: a read never sees a write half done
        self._lock = asyncio.Lock()

    # 1. opening

    async def open(self) -> None:
        db = await aiosqlite.connect(self.path)
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA busy_timeout=10000")
            await upgrade_sqlite(db, self.path)
        except BaseException:
            await db.close()
            raise
        self._db = db

    async def aclose(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None
        self._matrices.clear()

    async def __aenter__(self) -> SQLiteIndex:
        await self.open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("the index is not open")
        return self._db

    @property
    def lock(self) -> asyncio.Lock:
        """Held by whatever runs a statement or transaction on `db` (the vector stores' rows share it)."""
        return self._lock

    # 2. writes

    async def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        async with self._lock, self.db.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def _write(self, vector_store_id: str, statements: Iterable[tuple[str, Any]]) -> list[int]:
        """`statements` in one write transaction that raises the vector store's generation; each one's rowcount
        (the caller holds the lock)."""
        await self.db.commit()
        await self.db.execute("BEGIN IMMEDIATE")
        try:
            counts = []
            for sql, params in statements:
                many = isinstance(params, list)
                cur = await (self.db.executemany(sql, params) if many else self.db.execute(sql, params))
                counts.append(cur.rowcount)
            await self.db.execute(_BUMP, (vector_store_id,))
            await self.db.commit()
        except BaseException:
            await self.db.rollback()
            raise
        self._matrices.pop(vector_store_id, None)
        return counts

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
        where = (vector_store_id, file_id)
        attrs = json.dumps(attributes)
        values = [
            (vector_store_id, file_id, i, t, attrs, to_blob(v))
            for i, (t, v) in enumerate(zip(chunks, rows, strict=True))
        ]
        async with self._lock:
            if len(rows):
                await self._check_dimensions(vector_store_id, file_id, rows.shape[1])
            await self._write(
                vector_store_id,
                [
                    (_DELETE_WORDS + "vector_store_id = ? AND file_id = ?", where),
                    ("DELETE FROM vector_store_chunks WHERE vector_store_id = ? AND file_id = ?", where),
                    (
                        "INSERT INTO vector_store_chunks (vector_store_id, file_id, chunk_index, text, attributes, "
                        "vector) VALUES (?, ?, ?, ?, ?, ?)",
                        values,
                    ),
                    (
                        "INSERT INTO vector_store_chunks_fts (rowid, text) SELECT id, text FROM vector_store_chunks "
                        "WHERE vector_store_id = ? AND file_id = ?",
                        where,
                    ),
                ],
            )

    async def _check_dimensions(self, vector_store_id: str, file_id: str, dimensions: int) -> None:
        async with self.db.execute(
            "SELECT length(vector) FROM vector_store_chunks WHERE vector_store_id = ? AND file_id != ? LIMIT 1",
            (vector_store_id, file_id),
        ) as cur:
            row = await cur.fetchone()
        if row is not None and row[0] != 4 * dimensions:
            raise VectorDimensionsDiffer(
                f"vectors of {dimensions} dimensions, but the vector store's have {row[0] // 4}"
            )

    async def set_attributes(self, vector_store_id: str, file_id: str, attributes: Attributes) -> bool:
        sql = "UPDATE vector_store_chunks SET attributes = ? WHERE vector_store_id = ? AND file_id = ?"
        async with self._lock:
            (count,) = await self._write(
                vector_store_id, [(sql, (json.dumps(attributes), vector_store_id, file_id))]
            )
        return count > 0

    async def delete_file(self, vector_store_id: str, file_id: str) -> int:
        where = (vector_store_id, file_id)
        async with self._lock:
            _, count = await self._write(
                vector_store_id,
                [
                    (_DELETE_WORDS + "vector_store_id = ? AND file_id = ?", where),
                    ("DELETE FROM vector_store_chunks WHERE vector_store_id = ? AND file_id = ?", where),
                ],
            )
        return count

    async def delete_store(self, vector_store_id: str) -> int:
        # its generation row stays (raised once more), so that no generation of it is ever seen twice
        async with self._lock:
            _, count = await self._write(
                vector_store_id,
                [
                    (_DELETE_WORDS + "vector_store_id = ?", (vector_store_id,)),
                    ("DELETE FROM vector_store_chunks WHERE vector_store_id = ?", (vector_store_id,)),
                ],
            )
        return count

    async def file_chunks(self, vector_store_id: str, file_id: str) -> list[StoredChunk]:
        rows = await self._read(
            "SELECT chunk_index, text FROM vector_store_chunks WHERE vector_store_id = ? AND file_id = ? "
            "ORDER BY chunk_index",
            (vector_store_id, file_id),
        )
        return [StoredChunk(int(i), str(t)) for i, t in rows]

    # 3. the matrices

    async def _generations(self, vector_store_ids: Sequence[str]) -> dict[str, int]:
        marks = ", ".join("?" * len(vector_store_ids))
        rows = await self._read(
            f"SELECT vector_store_id, generation FROM vector_store_generations WHERE vector_store_id IN ({marks})",
            tuple(vector_store_ids),
        )
        return {str(s): int(g) for s, g in rows}

    async def matrix(self, vector_store_id: str, generation: int) -> StoreMatrix:
        """The vector store's chunks as one matrix, loaded unless the one held is of `generation`."""
        held = self._matrices.get(vector_store_id)
        if held is not None and held[0] == generation:
            self._matrices.move_to_end(vector_store_id)
            return held[1]
        rows = await self._read(
            "SELECT id, file_id, attributes, vector FROM vector_store_chunks WHERE vector_store_id = ? ORDER BY id",
            (vector_store_id,),
        )
        loaded = await run_on(SEARCH, matrix_of_rows, rows)
        self._matrices[vector_store_id] = (generation, loaded)
        self._matrices.move_to_end(vector_store_id)
        while (
            len(self._matrices) > 1
            and sum(m.nbytes for _, m in self._matrices.values()) > self.max_cached_bytes
        ):
            self._matrices.popitem(last=False)
        return loaded

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
        generations = await self._generations(vector_store_ids)
        stores = {s: await self.matrix(s, g) for s, g in generations.items()}
        allowed = {s: m.allowed_files(filters) for s, m in stores.items()}
        if not any(allowed.values()):
            return []
        limit = candidates(max_num_results)
        vector = None if query.vector is None else unit_rows(query.vector)
        ranking, by_vector, by_text = plan(ranking, vector is not None)
        nearest, words = await asyncio.gather(  # the vector scan in a thread, the keyword query in SQLite's
            run_on(SEARCH, nearest_in, stores, allowed, vector, limit) if by_vector else _nothing(),
            self._keywords(stores, allowed, query.text, limit) if by_text else _nothing(),
        )
        return await self._hits(ranked(nearest, words, ranking, max_num_results))

    async def _keywords(
        self, stores: dict[str, StoreMatrix], allowed: dict[str, list[str]], text: str, limit: int
    ) -> list[int]:
        """The chunks of the allowed files holding any word of `text`, best BM25 first."""
        match = fts_query(text)
        if match is None:
            return []
        scopes: list[str] = []
        params: list[Any] = [match]
        for store, files in allowed.items():
            if len(files) == len(stores[store].files):  # every file: no list to check
                scopes.append("c.vector_store_id = ?")
                params.append(store)
            elif files:
                scopes.append("(c.vector_store_id = ? AND c.file_id IN (SELECT value FROM json_each(?)))")
                params += [store, json.dumps(files)]
        scope = " OR ".join(scopes)
        rows = await self._read(
            "SELECT c.id FROM vector_store_chunks_fts JOIN vector_store_chunks c ON c.id = vector_store_chunks_fts.rowid "
            f"WHERE vector_store_chunks_fts MATCH ? AND ({scope}) "
            "ORDER BY bm25(vector_store_chunks_fts), c.id LIMIT ?",
            (*params, limit),
        )
        return [int(r[0]) for r in rows]

    async def _hits(self, scored: list[tuple[int, float]]) -> list[Hit]:
        if not scored:
            return []
        marks = ", ".join("?" * len(scored))
        found = await self._read(
            "SELECT id, vector_store_id, file_id, chunk_index, text, attributes FROM vector_store_chunks "
            f"WHERE id IN ({marks})",
            tuple(c for c, _ in scored),
        )
        rows = {int(r[0]): r for r in found}
        return [
            Hit(str(r[1]), str(r[2]), int(r[3]), str(r[4]), json.loads(r[5]), round(score, 6))
            for c, score in scored
            if (r := rows.get(c)) is not None  # a chunk removed since the lists were made is left out
        ]


async def _nothing() -> list[Any]:
    return []

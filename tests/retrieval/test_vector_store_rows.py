"""The vector stores' rows' contract, run on each backend (a SQLite file, Postgres): stores, files and batches
kept and read back; file counts and bytes; the ingestion's leases (a claim takes free files only, oldest first;
two processes claiming at once never take the same file; an expired lease is free; a finish needs the lease and
the same copy of the file; a file added again is free to claim); a batch cancelled with its files."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from vllm_responses.config import Config
from vllm_responses.retrieval.postgres_vector_store_rows import PostgresVectorStoreRows
from vllm_responses.retrieval.sqlite_vector_store_rows import SQLiteVectorStoreRows
from vllm_responses.retrieval.vector_store_records import BatchRow, FileCounts, FileRow, StoreRow
from vllm_responses.retrieval.vector_store_rows import VectorStoreRows
from vllm_responses.service.vector_store_setup import open_rows
from vllm_responses.store.open import store_for

CHUNKING = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "responses.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def two(where: str) -> AsyncIterator[tuple[VectorStoreRows, VectorStoreRows]]:
    """The rows as two processes sharing the database see them (each its own index and connections)."""
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(open_rows(Config(), store_for(where))) for _ in range(2)]
        kinds = {type(rows) for _, rows in opened}
        assert kinds == {SQLiteVectorStoreRows if where.endswith(".db") else PostgresVectorStoreRows}
        yield opened[0][1], opened[1][1]


def a_file(file_id: str, created_at: float, batch_id: str | None = None) -> FileRow:
    return FileRow(
        "vs_1", file_id, "proj", batch_id, "in_progress", {"k": "v"}, CHUNKING, 0, None, created_at
    )


async def test_stores_files_and_counts(two: tuple[VectorStoreRows, VectorStoreRows]) -> None:
    rows, other = two
    store = StoreRow("vs_1", "proj", "s", None, {"team": "a"}, 100.0, 100.0, 7, 100.0 + 7 * 86400)
    await rows.add_store(store)
    await rows.add_store(replace(store, id="vs_2", project="other", created_at=50.0))
    assert await other.get_store("vs_1") == store and await other.get_store("vs_9") is None
    assert [s.id for s in await other.stores("proj")] == ["vs_1"]
    renamed = replace(store, name="t", description="d", metadata={}, expires_days=None, expires_at=None)
    await rows.put_store(renamed)
    await rows.touch("vs_1", 200.0, None)
    assert await other.get_store("vs_1") == replace(renamed, last_active_at=200.0)

    batch = BatchRow("vsfb_1", "vs_1", "proj", "in_progress", 110.0)
    await rows.add_files([a_file("file-a", 101.0), a_file("file-b", 102.0, "vsfb_1")], batch)
    assert await other.get_batch("vsfb_1") == batch
    assert [f.file_id for f in await other.files("vs_1")] == ["file-a", "file-b"]
    assert [f.file_id for f in await other.files("vs_1", batch_id="vsfb_1")] == ["file-b"]
    assert await other.files("vs_1", status="completed") == []
    assert await rows.set_file_attributes("vs_1", "file-a", {"year": 2024})
    assert not await rows.set_file_attributes("vs_1", "file-z", {})
    assert (await other.get_file("vs_1", "file-a")) == replace(
        a_file("file-a", 101.0), attributes={"year": 2024}
    )

    (claimed,) = await rows.claim("one", 300.0, 10.0, 1)
    assert claimed.file_id == "file-a"  # oldest first
    assert await rows.finish(claimed, "one", "completed", 1234)
    assert await other.counts("vector_store_id", "vs_1") == FileCounts(in_progress=1, completed=1)
    assert await other.counts("batch_id", "vsfb_1") == FileCounts(in_progress=1)
    assert await other.usage_bytes("vs_1") == 1234 and await other.project_bytes("proj") == 1234

    assert await rows.cancel_batch("vsfb_1") and not await rows.cancel_batch("vsfb_1")
    assert await other.counts("batch_id", "vsfb_1") == FileCounts(cancelled=1)
    assert await rows.delete_file("vs_1", "file-a") and not await rows.delete_file("vs_1", "file-a")
    assert await rows.delete_store("vs_1") and not await other.delete_store("vs_1")
    assert await other.files("vs_1") == [] and await other.get_batch("vsfb_1") is None
    assert [s.id for s in await other.stores("other")] == ["vs_2"]


async def test_claims_are_leases(two: tuple[VectorStoreRows, VectorStoreRows]) -> None:
    one, two_ = two
    await one.add_files([a_file(f"file-{i}", 100.0 + i) for i in range(6)])
    # both processes claim at once: each file goes to one of them
    got = await asyncio.gather(one.claim("one", 200.0, 10.0, 4), two_.claim("two", 200.0, 10.0, 4))
    ids = [f.file_id for claimed in got for f in claimed]
    assert sorted(ids) == [f"file-{i}" for i in range(6)] and len(set(ids)) == 6
    assert [f.file_id for f in got[0]] == sorted(f.file_id for f in got[0])  # oldest first
    assert await one.claim("three", 205.0, 10.0, 10) == []  # every lease live

    theirs = got[1][0]
    assert not await one.finish(theirs, "one", "completed")  # not one's lease
    await two_.renew("two", 300.0)  # two's leases last until 300
    assert await one.claim("three", 250.0, 10.0, 10) == got[0]  # one's expired at 210: free to claim
    await two_.release_own("two")  # two restarted under its name: its files free at once
    assert sorted(f.file_id for f in await one.claim("three", 251.0, 10.0, 10)) == sorted(
        f.file_id for f in got[1]
    )
    assert not await two_.finish(theirs, "two", "completed")  # its lease is gone with its old life

    again = a_file(theirs.file_id, 400.0)  # the file added again: a new copy, free to claim
    await one.add_files([again])
    assert not await one.finish(theirs, "three", "completed")  # the old copy's finish is refused
    (reclaimed,) = [f for f in await two_.claim("two", 401.0, 10.0, 10) if f.file_id == theirs.file_id]
    assert reclaimed == again
    assert await two_.finish(reclaimed, "two", "failed", 0, {"code": "server_error", "message": "m"})
    done = await one.get_file("vs_1", theirs.file_id)
    assert done is not None and (done.status, done.last_error) == (
        "failed",
        {"code": "server_error", "message": "m"},
    )
    assert not await two_.finish(reclaimed, "two", "completed")  # finished once only


async def test_kept_text_holders_and_expired_stores(two: tuple[VectorStoreRows, VectorStoreRows]) -> None:
    rows, other = two
    day = 86400.0
    for i, expires_at in enumerate([100.0 + day, 50.0 + day, None]):
        store = StoreRow(f"vs_{i + 1}", "proj", "s", None, {}, 10.0, 10.0, 1, expires_at)
        await rows.add_store(store)
        await rows.add_files([replace(a_file("file-a", 20.0), vector_store_id=store.id)])
    await rows.add_files([replace(a_file("file-b", 21.0), vector_store_id="vs_3")])

    claimed = await rows.claim("one", 30.0, 10.0, 10)
    assert len(claimed) == 4
    for f in claimed:
        parts = ["page one", "page two"] if f.vector_store_id == "vs_1" and f.file_id == "file-a" else None
        assert await rows.finish(f, "one", "completed", 10, content=parts)
    assert await other.content("vs_1", "file-a") == ["page one", "page two"]
    assert await other.content("vs_2", "file-a") is None and await other.content("vs_9", "file-a") is None

    assert [f.vector_store_id for f in await other.holding("file-a")] == ["vs_1", "vs_2", "vs_3"]
    assert await other.file_ids("", 10) == ["file-a", "file-b"]
    assert await other.file_ids("file-a", 10) == ["file-b"] and await other.file_ids("", 1) == ["file-a"]

    assert await other.expired_stores(10.0 + day, 10) == []
    assert await other.expired_stores(200.0 + day, 10) == ["vs_2", "vs_1"]  # longest expired first
    await rows.empty_store("vs_2")
    assert await other.files("vs_2") == [] and await other.get_store("vs_2") is not None
    assert await other.expired_stores(200.0 + day, 10) == ["vs_1"]  # an empty one is not listed again

"""The SQLite store: round trip, persistence across reopen, delete, and its bounds."""

from __future__ import annotations

import time
from pathlib import Path

from vllm_responses.store import MemoryStore, SQLiteStore, StoredResponse


def record(i: int, created_at: float | None = None) -> StoredResponse:
    return StoredResponse(
        id=f"resp_{i}",
        response={"id": f"resp_{i}", "status": "completed", "output": [{"type": "message", "n": i}]},
        input_items=[{"id": f"msg_{i}", "type": "message", "role": "user", "content": []}],
        history=[{"type": "message", "role": "user", "content": "hi"}],
        include_outputs=bool(i % 2),
        created_at=time.time() if created_at is None else created_at,
    )


async def test_sqlite_round_trip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.db"
    store = SQLiteStore(path)
    await store.open()
    await store.save(record(1))
    assert await store.get("resp_1") == (await store.get("resp_1"))
    got = await store.get("resp_1")
    assert got is not None and got.response["output"][0]["n"] == 1 and got.include_outputs
    await store.aclose()
    again = SQLiteStore(path)
    await again.open()
    assert (await again.get("resp_1")) == got
    assert await again.delete("resp_1") is True
    assert await again.delete("resp_1") is False
    assert await again.get("resp_1") is None
    await again.aclose()


async def test_sqlite_bounds(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.db", max_age_s=60, max_rows=3)
    await store.open()
    await store.save(record(0, created_at=time.time() - 3600))
    for i in range(1, 6):
        await store.save(record(i, created_at=time.time() + i))
    await store._prune()
    kept = [i for i in range(6) if await store.get(f"resp_{i}") is not None]
    assert kept == [3, 4, 5]
    await store.aclose()


async def test_memory_store_is_bounded() -> None:
    store = MemoryStore(max_rows=2)
    for i in range(3):
        await store.save(record(i))
    assert await store.get("resp_0") is None and await store.get("resp_2") is not None

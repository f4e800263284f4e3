"""The conversation half of every store (memory, SQLite, a real Postgres), member by member: order, cursors, bounds, deletes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from vllm_responses.store.base import ResponseStore, StoredConversation
from vllm_responses.store.memory import MemoryStore
from vllm_responses.store.open import store_for


def msg(i: int) -> dict[str, object]:
    return {"id": f"msg_{i}", "type": "message", "role": "user", "status": "completed", "content": []}


@pytest.fixture
async def store(store_db: str) -> AsyncIterator[ResponseStore]:
    s = store_for(store_db)
    await s.open()
    yield s
    await s.aclose()


async def test_round_trip_order_and_cursors(store: ResponseStore) -> None:
    conv = StoredConversation("conv_1", 1000.0, {"k": "v"})
    await store.create_conversation(conv, [msg(0), msg(1)])
    assert await store.get_conversation("conv_1") == conv
    assert await store.get_conversation("conv_2") is None
    assert (
        await store.add_conversation_items("conv_1", [msg(2), msg(1), msg(3)]) is True
    )  # msg_1 held: skipped
    assert await store.add_conversation_items("conv_2", [msg(9)]) is False

    async def ids(**kw: object) -> list[str]:
        return [str(i["id"]) for i in await store.list_conversation_items("conv_1", **kw)]  # type: ignore[arg-type]

    assert await ids() == ["msg_0", "msg_1", "msg_2", "msg_3"]
    assert await ids(descending=True) == ["msg_3", "msg_2", "msg_1", "msg_0"]
    assert await ids(after="msg_1", limit=1) == ["msg_2"]
    assert await ids(after="msg_2", descending=True) == ["msg_1", "msg_0"]
    assert await store.get_conversation_item("conv_1", "msg_2") == msg(2)
    assert await store.get_conversation_item("conv_2", "msg_2") is None

    assert await store.delete_conversation_item("conv_1", "msg_2") is True
    assert await store.delete_conversation_item("conv_1", "msg_2") is False
    assert await ids() == ["msg_0", "msg_1", "msg_3"]
    updated = await store.update_conversation("conv_1", {"n": "2"})
    assert updated == StoredConversation("conv_1", 1000.0, {"n": "2"})
    assert await store.update_conversation("conv_2", {}) is None
    assert await store.delete_conversation("conv_1") is True
    assert await store.delete_conversation("conv_1") is False
    assert await store.list_conversation_items("conv_1") == []
    assert await store.get_conversation_item("conv_1", "msg_0") is None


async def test_creating_again_is_a_no_op(store: ResponseStore) -> None:
    """A create run twice (Postgres retries a call whose commit acknowledgement was lost) is no error and
    leaves one conversation with its items once."""
    conv = StoredConversation("conv_r", 1000.0, {"k": "v"})
    await store.create_conversation(conv, [msg(0), msg(1)])
    await store.create_conversation(conv, [msg(0), msg(1)])
    assert await store.get_conversation("conv_r") == conv
    assert [i["id"] for i in await store.list_conversation_items("conv_r")] == ["msg_0", "msg_1"]


async def test_items_per_conversation_are_bounded(store: ResponseStore) -> None:
    store.max_conversation_items = 3  # type: ignore[attr-defined]
    await store.create_conversation(StoredConversation("conv_b", time.time()), [msg(i) for i in range(5)])
    await store.add_conversation_items("conv_b", [msg(5)])
    assert [i["id"] for i in await store.list_conversation_items("conv_b")] == ["msg_3", "msg_4", "msg_5"]


async def test_conversations_are_kept_across_reopen_and_pruned(durable_db: str) -> None:
    db = durable_db
    store = store_for(db, max_rows=2)
    await store.open()
    for i in range(3):
        await store.create_conversation(StoredConversation(f"conv_{i}", time.time()), [msg(i)])
    await store.aclose()
    again = store_for(db, max_rows=2)
    await again.open()  # opening prunes: the least recently updated conversation goes, with its items
    assert await again.get_conversation("conv_0") is None
    assert await again.get_conversation_item("conv_0", "msg_0") is None
    assert [i["id"] for i in await again.list_conversation_items("conv_2")] == ["msg_2"]
    await again.aclose()
    old = store_for(db, max_age_s=0.0)
    await old.open()
    assert await old.get_conversation("conv_2") is None
    await old.aclose()


async def test_memory_store_bounds_conversations() -> None:
    store = MemoryStore(max_rows=2)
    for i in range(3):
        await store.create_conversation(StoredConversation(f"conv_{i}", time.time()), [])
    assert await store.get_conversation("conv_0") is None
    assert await store.get_conversation("conv_2") is not None

"""The response stores, each backend in turn (memory, SQLite, a real Postgres): round trip, persistence across
reopen, delete, items by id, unfinished responses, the bounds, and each project's stored bytes."""

from __future__ import annotations

import dataclasses
import json
import time

from vllm_responses.store.base import ResponseStore, StoredConversation, StoredResponse, stored_size
from vllm_responses.store.memory import MemoryStore
from vllm_responses.store.open import store_for


def record(i: int, created_at: float | None = None) -> StoredResponse:
    return StoredResponse(
        id=f"resp_{i}",
        response={"id": f"resp_{i}", "status": "completed", "output": [{"type": "message", "n": i}]},
        input_items=[{"id": f"msg_{i}", "type": "message", "role": "user", "content": []}],
        history=[{"type": "message", "role": "user", "content": "hi \u0000 \u00e9 \U0001f600"}],
        include_outputs=bool(i % 2),
        created_at=time.time() if created_at is None else created_at,
    )


async def opened(db: str, **bounds: float) -> ResponseStore:
    store = store_for(db, **bounds)  # type: ignore[arg-type]
    await store.open()
    return store


async def test_round_trip_and_reopen(store_db: str) -> None:
    store = await opened(store_db)
    await store.save(record(1))
    got = await store.get("resp_1")
    assert got is not None and got.history == record(1).history and got.response == record(1).response
    assert got and got.response["output"][0]["n"] == 1 and got.include_outputs
    assert list(got.response) == ["id", "status", "output"]  # key order kept (JSON kept as text)
    await store.save(record(1, created_at=got.created_at + 1))  # a second save replaces it
    assert (await store.get("resp_1")).created_at == got.created_at + 1  # type: ignore[union-attr]
    if store_db != ":memory:":
        await store.aclose()
        store = await opened(store_db)
    again = await store.get("resp_1")
    assert again is not None and again.history == got.history and again.input_items == got.input_items
    assert await store.delete("resp_1") is True
    assert await store.delete("resp_1") is False
    assert await store.get("resp_1") is None
    await store.aclose()


async def test_bounds(store_db: str) -> None:
    store = await opened(store_db, max_age_s=60, max_rows=3)
    await store.save(record(0, created_at=time.time() - 3600))
    for i in range(1, 6):
        await store.save(record(i, created_at=time.time() + i))
    await store.prune()
    kept = [i for i in range(6) if await store.get(f"resp_{i}") is not None]
    assert kept == [3, 4, 5]
    await store.aclose()


async def test_memory_store_is_bounded() -> None:
    store = MemoryStore(max_rows=2)
    for i in range(3):
        await store.save(record(i))
    assert await store.get("resp_0") is None and await store.get("resp_2") is not None


def conversation(i: int) -> StoredResponse:
    """A response whose history holds an earlier turn's items, then its own input and output."""
    old = {"id": "msg_old", "type": "message", "role": "user", "content": "earlier"}
    own_in = {"id": f"msg_in{i}", "type": "message", "role": "user", "content": "now"}
    own_out = {
        "id": f"ci_{i}",
        "type": "code_interpreter_call",
        "code": "1",
        "outputs": [{"type": "logs", "logs": "1"}],
    }
    return StoredResponse(
        id=f"resp_{i}",
        response={"id": f"resp_{i}", "output": [{**own_out, "outputs": None}]},  # outputs not included
        input_items=[own_in],
        history=[old, own_in, own_out],
        include_outputs=False,
        created_at=time.time() + i,
    )


async def test_items_are_found_by_id_until_their_response_goes(store_db: str) -> None:
    store = await opened(store_db, max_rows=1)
    await store.save(conversation(1))
    found = await store.find_item("ci_1")
    assert found is not None and found["outputs"] == [
        {"type": "logs", "logs": "1"}
    ]  # the full item, from history
    assert (await store.find_item("msg_in1"))["content"] == "now"  # type: ignore[index]
    assert await store.find_item("msg_old") is None  # not this response's own item
    await store.save(conversation(2))
    await store.prune()
    assert await store.find_item("ci_1") is None and await store.find_item("ci_2") is not None
    assert await store.delete("resp_2") and await store.find_item("ci_2") is None
    await store.aclose()


def _owned(project: str, n: int, text: str) -> StoredResponse:
    """A response of `project` whose input item has the client-chosen id `msg_shared`."""
    item = {"id": "msg_shared", "type": "message", "role": "user", "content": text}
    return StoredResponse(
        id=f"resp_{project}_{n}",
        response={"id": f"resp_{project}_{n}", "status": "completed", "output": []},
        input_items=[item],
        history=[item],
        include_outputs=False,
        created_at=time.time(),
        project=project,
    )


async def test_an_item_id_is_its_projects_and_another_project_cannot_take_it(store_db: str) -> None:
    store = await opened(store_db)
    await store.save(_owned("proj_a", 1, "A's words"))
    await store.save(_owned("proj_b", 1, "B's words"))  # B stores an item under the id A's has
    assert (await store.find_item("msg_shared", "proj_a"))["content"] == "A's words"  # type: ignore[index]
    assert (await store.find_item("msg_shared", "proj_b"))["content"] == "B's words"  # type: ignore[index]
    assert await store.delete("resp_proj_b_1")
    assert (await store.find_item("msg_shared", "proj_a"))["content"] == "A's words"  # type: ignore[index]
    assert await store.find_item("msg_shared", "proj_b") is None
    await store.save(_owned("proj_a", 2, "A again"))  # within a project, the newest copy is found
    assert (await store.find_item("msg_shared", "proj_a"))["content"] == "A again"  # type: ignore[index]
    await store.aclose()


async def test_unfinished_leases_and_fail_abandoned(store_db: str) -> None:
    from vllm_responses.runs.records import INTERRUPTED_MESSAGE, fail_abandoned

    store = await opened(store_db)
    now = time.time()
    await store.take_lease("resp_0", "replica-a", now + 60)  # leased before its first record, as replicas do
    for i, status in enumerate(["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]):
        r = record(i)
        output = [{"type": "code_interpreter_call", "id": "ci", "status": "interpreting"}] if i == 1 else []
        await store.save(
            StoredResponse(**{**r.__dict__, "response": {**r.response, "status": status, "output": output}})
        )
    assert sorted(r.id for r in await store.unfinished()) == ["resp_0", "resp_1"]
    # resp_1 has no lease (as from before leases existed); resp_0's is live, unless its owner is known dead
    assert await store.abandoned(now) == ["resp_1"]
    assert sorted(await store.abandoned(now, "replica-a")) == ["resp_0", "resp_1"]
    assert sorted(await store.abandoned(now + 61)) == ["resp_0", "resp_1"]  # expired
    # a cancel request reaches the lease's owner through its renewal; none without a lease
    assert await store.renew_leases("replica-a", now + 120) == []
    assert await store.request_cancel("resp_0") and not await store.request_cancel("resp_1")
    assert await store.renew_leases("replica-b", now + 120) == []
    assert await store.renew_leases("replica-a", now + 120) == ["resp_0"]
    assert await store.abandoned(now + 61) == ["resp_1"]  # renewed
    assert await fail_abandoned(store, await store.abandoned(now + 121)) == 2
    assert await store.unfinished() == [] and await store.abandoned(now + 121) == []
    assert await fail_abandoned(store, ["resp_2"]) == 0  # an ended response stays as it is
    assert await store.renew_leases("replica-a", now + 180) == []  # its lease went with it
    for rid in ("resp_0", "resp_1"):
        got = await store.get(rid)
        assert got is not None and got.response["status"] == "failed"
        assert got.response["error"] == {"code": "server_error", "message": INTERRUPTED_MESSAGE}
        assert got.input_items == record(0 if rid == "resp_0" else 1).input_items
    got = await store.get("resp_1")
    assert got is not None and got.response["output"][0]["status"] == "incomplete"
    got = await store.get("resp_2")
    assert got is not None and got.response["status"] == "completed"
    await store.aclose()


async def test_stored_bytes_are_counted_per_project(store_db: str) -> None:
    """What each project keeps: its responses' and its conversations' items' bytes as written, another
    project's apart; a delete gives them back."""
    store = await opened(store_db)
    try:
        assert await store.stored_bytes("proj_a") == 0
        rec = dataclasses.replace(record(1), project="proj_a")
        await store.save(rec)
        own = stored_size(*(json.dumps(t) for t in (rec.response, rec.input_items, rec.history)))
        assert await store.stored_bytes("proj_a") == own
        await store.save(rec)  # saved again (its final record): counted once
        item = {"id": "msg_c1", "type": "message", "role": "user", "content": "é" * 100}
        await store.create_conversation(StoredConversation("conv_1", time.time(), {}, "proj_a"), [item])
        assert await store.stored_bytes("proj_a") == own + stored_size(json.dumps(item))
        await store.save(dataclasses.replace(record(2), project="proj_b"))
        assert await store.stored_bytes("proj_a") == own + stored_size(json.dumps(item))
        await store.delete("resp_1")
        await store.delete_conversation_item("conv_1", "msg_c1")
        assert await store.stored_bytes("proj_a") == 0 and await store.stored_bytes("proj_b") > 0
    finally:
        await store.aclose()

"""A full pool makes room for an owner from its own idle containers only, and each owner's `OwnerQuota` bounds
its own containers (the real `WorkerPool` over stand-in workers, see scripted.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from interpreter_service.api import MemoryLimitRefused, OwnerQuota, PoolExhausted, QuotaExceeded
from interpreter_service.pool.capacity import Capacity
from interpreter_service.service.app import create_app
from interpreter_service.service.client import HTTPInterpreter
from tests.interpreter.scripted import ScriptedPool

M = 1 << 20


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[ScriptedPool]:
    p = ScriptedPool(
        tmp_path, workers=1, spares=0, max_workers=2, memory_limit="256m", js_heap_mb=64, queue_timeout_s=0.2
    )
    await p.start()
    yield p
    await p.aclose()


async def test_a_full_pool_never_evicts_another_owners_idle_container(pool: ScriptedPool) -> None:
    b = await pool.create_container(owner="b")
    await pool.execute(b.id, "x = 41")
    a1 = await pool.create_container(owner="a")
    await pool.execute(a1.id, "y = 1")  # a's is used after b's: b's is the least recently used
    pool.pin(a1.id)  # a's only container is in use: a has nothing of its own to evict
    with pytest.raises(PoolExhausted) as refused:
        await pool.create_container(owner="a")
    assert not isinstance(refused.value, QuotaExceeded)
    assert (await pool.execute(b.id, "print(x + 1)")).logs == "42\n"  # b's container and state survive
    pool.unpin(a1.id)
    a2 = await pool.create_container(owner="a")  # now a's own idle one makes room
    assert {c.id for c in await pool.list_containers()} == {b.id, a2.id}


async def test_a_waiter_without_room_of_its_own_does_not_hold_up_another_owner(pool: ScriptedPool) -> None:
    b = await pool.create_container(owner="b")
    a = await pool.create_container(owner="a")
    pool.pin(a.id)
    pool.queue_timeout_s = 30
    waiting = asyncio.create_task(pool.create_container(owner="a"))  # waits for room: a has none to give
    await asyncio.sleep(0.05)
    assert pool.stats()["waiters"] == 1
    b2 = await asyncio.wait_for(pool.create_container(owner="b"), 5)  # swaps b's own idle one, at once
    assert {c.id for c in await pool.list_containers()} == {a.id, b2.id} and b.id != b2.id
    pool.unpin(a.id)  # a's becomes idle: its own waiter takes its room
    assert (await asyncio.wait_for(waiting, 5)).owner == "a"


async def test_an_owner_at_its_container_quota_evicts_its_own_or_is_refused(tmp_path: Path) -> None:
    pool = ScriptedPool(
        tmp_path, workers=1, spares=0, max_workers=4, memory_limit="256m", js_heap_mb=64, queue_timeout_s=0.2
    )
    await pool.start()
    try:
        quota = OwnerQuota(max_containers=1)
        b = await pool.create_container(owner="b", quota=quota)
        a1 = await pool.create_container(owner="a", quota=quota)
        pool.pin(a1.id)
        with pytest.raises(QuotaExceeded, match="its project holds 1 container"):
            await pool.create_container(owner="a", quota=quota)  # room in the pool, none in a's quota
        pool.unpin(a1.id)
        a2 = await pool.create_container(owner="a", quota=quota)  # a's own idle one goes
        assert {c.id for c in await pool.list_containers()} == {b.id, a2.id}
    finally:
        await pool.aclose()


async def test_an_owner_memory_quota_counts_memory_limits(tmp_path: Path) -> None:
    pool = ScriptedPool(
        tmp_path, workers=1, spares=0, max_workers=8, memory_limit="256m", js_heap_mb=64, queue_timeout_s=0.2
    )
    await pool.start()
    try:
        quota = OwnerQuota(max_memory_bytes=512 * M)
        with pytest.raises(MemoryLimitRefused, match="512m of sandbox memory its project may hold"):
            await pool.create_container(owner="a", memory_limit="1g", quota=quota)
        a1 = await pool.create_container(owner="a", quota=quota)
        a2 = await pool.create_container(owner="a", quota=quota)
        pool.pin(a1.id)
        pool.pin(a2.id)
        with pytest.raises(QuotaExceeded, match="512m of memory limits"):
            await pool.create_container(owner="a", quota=quota)
        assert (await pool.create_container(owner="b", quota=quota)).owner == "b"  # b's own share
    finally:
        await pool.aclose()


async def test_capacity_evicts_only_the_owners_own_and_counts_its_quota() -> None:
    idle: dict[str | None, list[int]] = {"a": [], "b": [1]}
    cap: Capacity

    def evict(owner: str | None) -> None:
        idle[owner].pop(0)
        cap.release(1, owner, 1)

    cap = Capacity(max_live=2, budget=10, evictable=lambda o: [(1, 1) for _ in idle[o]], evict=evict)
    await cap.acquire(1, 1, "x", owner="b", size=1)
    await cap.acquire(1, 1, "x", owner="a", size=1)
    with pytest.raises(PoolExhausted):
        await cap.acquire(1, 0.05, "x", owner="a", size=1)
    assert idle == {"a": [], "b": [1]} and cap.owned == {"a": [1, 1], "b": [1, 1]}
    await cap.acquire(1, 0.05, "x", owner="b", size=1)  # b swaps its own
    assert idle["b"] == [] and cap.owned == {"a": [1, 1], "b": [1, 1]}


async def test_the_quota_travels_through_the_sandbox_services_api(tmp_path: Path) -> None:
    pool = ScriptedPool(
        tmp_path, workers=1, spares=0, max_workers=4, memory_limit="256m", js_heap_mb=64, queue_timeout_s=0.2
    )
    await pool.start()
    transport = httpx.ASGITransport(app=create_app(pool, manage_lifecycle=False))
    try:
        async with HTTPInterpreter("http://sandbox", transport=transport) as client:
            quota = OwnerQuota(max_containers=1)
            held = await client.create_container(owner="a", quota=quota)
            pool.pin(held.id)
            with pytest.raises(QuotaExceeded, match="its project holds 1 container"):
                await client.create_container(owner="a", quota=quota)
            assert (await client.create_container(owner="b", quota=quota)).owner == "b"
            async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as raw:
                r = await raw.post("/v1/containers", json={"owner": "a", "quota": {"max_containers": -1}})
            assert r.status_code == 400 and r.json()["error"]["type"] == "bad_request"
    finally:
        await pool.aclose()

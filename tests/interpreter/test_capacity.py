"""Container admission on its own (`capacity.py`, no workers): FIFO waiting, timeouts, cancelled waiters,
eviction, the memory budget and tiers. The pool's behaviour with real workers is in test_pool_load.py."""

from __future__ import annotations

import asyncio

import pytest

from interpreter_service.api import InterpreterError, MemoryLimitRefused, PoolExhausted
from interpreter_service.pool.capacity import Capacity, default_memory_budget
from interpreter_service.sizes import format_size, memory_tier

G = 1 << 30


def capacity(max_live: int = 2, budget: int = 4 * G, evictable: list[int] | None = None) -> Capacity:
    """A capacity whose idle containers are the costs in `evictable` (the first evicted first)."""
    idle = evictable if evictable is not None else []
    cap: Capacity

    def evict(owner: str | None) -> None:
        cap.release(idle.pop(0))

    def evictable(owner: str | None) -> list[tuple[int, int]]:
        return [(charge, 0) for charge in idle]

    cap = Capacity(max_live=max_live, budget=budget, evictable=evictable, evict=evict)
    return cap


async def test_waiters_are_served_in_order_as_room_appears() -> None:
    cap = capacity(max_live=1)
    await cap.acquire(G, 1, "x")
    served: list[int] = []

    async def waiter(i: int) -> None:
        await cap.acquire(G, 30, "x")
        served.append(i)

    tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
    await asyncio.sleep(0.01)
    assert cap.waiting == 3 and served == []
    for expected in ([0], [0, 1], [0, 1, 2]):
        cap.release(G)
        cap.wake()
        await asyncio.sleep(0.01)
        assert served == expected
    await asyncio.gather(*tasks)
    assert cap.live == 1 and cap.waiting == 0


async def test_a_newcomer_does_not_overtake_the_queue() -> None:
    cap = capacity(max_live=2, budget=3 * G)
    await cap.acquire(2 * G, 1, "x")
    big = asyncio.create_task(cap.acquire(2 * G, 30, "x"))  # needs the first to go
    await asyncio.sleep(0.01)
    small = asyncio.create_task(cap.acquire(G, 30, "x"))  # would fit now, but waits behind `big`
    await asyncio.sleep(0.01)
    assert cap.waiting == 2 and not small.done()
    cap.release(2 * G)
    cap.wake()
    await big
    await small
    assert (cap.live, cap.live_bytes) == (2, 3 * G)


async def test_timeout_is_pool_exhausted_and_leaves_nothing_behind() -> None:
    cap = capacity(max_live=1)
    await cap.acquire(G, 1, "x")
    with pytest.raises(PoolExhausted, match=r"within 0.05 s \(all 1 in use, 1g of the 4g memory budget\)"):
        await cap.acquire(G, 0.05, "x")
    assert cap.waiting == 0 and (cap.live, cap.live_bytes) == (1, G)


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_is_served() -> None:
    cap = capacity(max_live=1)
    await cap.acquire(G, 1, "x")
    first = asyncio.create_task(cap.acquire(G, 30, "x"))
    second = asyncio.create_task(cap.acquire(G, 30, "x"))
    await asyncio.sleep(0.01)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert cap.waiting == 1
    cap.release(G)
    cap.wake()
    await second
    assert (cap.live, cap.live_bytes) == (1, G)


async def test_room_granted_to_a_waiter_cancelled_meanwhile_is_given_back() -> None:
    cap = capacity(max_live=1)
    await cap.acquire(G, 1, "x")
    waiter = asyncio.create_task(cap.acquire(G, 30, "x"))
    await asyncio.sleep(0.01)
    cap.release(G)
    cap.wake()  # granted, but the waiter has not run yet
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (cap.live, cap.live_bytes) == (0, 0)


async def test_idle_containers_are_evicted_before_anyone_waits() -> None:
    idle = [G, G]
    cap = capacity(max_live=2, budget=4 * G, evictable=idle)
    await cap.acquire(G, 1, "x")
    await cap.acquire(G, 1, "x")
    await cap.acquire(3 * G, 0.05, "x")  # one idle container evicted (as many as needed) at once
    assert (cap.live, cap.live_bytes) == (2, 4 * G) and idle == [G]
    with pytest.raises(PoolExhausted):  # evicting the last idle one would not make room: it is kept
        await cap.acquire(4 * G, 0.05, "x")
    assert (cap.live, cap.live_bytes) == (2, 4 * G) and idle == [G]


async def test_what_never_fits_is_refused_and_closing_fails_the_waiters() -> None:
    cap = capacity(max_live=1, budget=2 * G)
    with pytest.raises(MemoryLimitRefused, match="more than the sandbox's whole memory budget of 2g"):
        await cap.acquire(3 * G, 1, "memory_limit '4g'")
    await cap.acquire(G, 1, "x")
    waiter = asyncio.create_task(cap.acquire(G, 30, "x"))
    await asyncio.sleep(0.01)
    cap.close(InterpreterError("closing"))
    with pytest.raises(InterpreterError, match="closing"):
        await waiter
    assert (cap.live, cap.live_bytes) == (1, G)


def test_memory_tiers_and_sizes() -> None:
    assert memory_tier("1g") == G and memory_tier("4g") == 4 * G and memory_tier("512m") == 512 << 20
    for refused in ("16g", "64g", "5g", "4097m"):
        with pytest.raises(MemoryLimitRefused, match="addresses at most 4 GiB"):
            memory_tier(refused)
    with pytest.raises(MemoryLimitRefused, match="too small"):
        memory_tier("1m")
    with pytest.raises(MemoryLimitRefused, match="bad size"):
        memory_tier("lots")
    assert [format_size(n) for n in (G, 1536 << 20, 3 << 19, (3 << 19) + 1)] == [
        "1g",
        "1536m",
        "1536k",
        "1.5m",
    ]
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert default_memory_budget() == total // 2


M = 1 << 20


async def test_charges_admit_what_caps_would_not_and_a_grown_charge_makes_newcomers_wait() -> None:
    """Containers whose caps cost 1.5 GiB each, charged 300 MiB: six fit a 2 GiB budget (their caps, one).
    Once they grew (`adjust`), the next waits; nothing running is stopped; a drop lets it in."""
    cap = capacity(max_live=10, budget=2 * G)
    for _ in range(6):
        await cap.acquire(1536 * M, 0.05, "x", charge=300 * M)
    assert (cap.live, cap.live_bytes) == (6, 1800 * M)
    with pytest.raises(PoolExhausted, match="1800m of the 2g memory budget"):  # 2100 MiB would not fit
        await cap.acquire(1536 * M, 0.05, "x", charge=300 * M)
    cap.adjust(-100 * M)  # one used less than its charge said: room for a seventh
    await cap.acquire(1536 * M, 0.05, "x", charge=300 * M)
    cap.adjust(+400 * M)  # they grew past the budget: the count stays, newcomers wait
    assert (cap.live, cap.live_bytes) == (7, 2400 * M)
    waiter = asyncio.create_task(cap.acquire(1536 * M, 30, "x", charge=300 * M))
    await asyncio.sleep(0.01)
    assert cap.waiting == 1 and not waiter.done()
    cap.adjust(-200 * M)  # 2200 MiB: still no room, still waiting
    await asyncio.sleep(0.01)
    assert cap.waiting == 1
    cap.release(500 * M)  # a container went: the pool wakes the queue
    cap.wake()
    await waiter
    assert (cap.live, cap.live_bytes) == (7, 2000 * M)


async def test_a_dropped_charge_wakes_the_waiters_by_itself() -> None:
    cap = capacity(max_live=10, budget=G)
    await cap.acquire(512 * M, 0.05, "x", charge=900 * M)  # a worker that grew to 900 MiB
    waiter = asyncio.create_task(cap.acquire(512 * M, 30, "x", charge=300 * M))
    await asyncio.sleep(0.01)
    assert cap.waiting == 1
    cap.adjust(-600 * M)  # its worker was killed: charged the floor again
    await asyncio.wait_for(waiter, 1)
    assert (cap.live, cap.live_bytes) == (2, 600 * M)


async def test_evicting_idle_containers_frees_their_charges_and_caps_still_bound_a_request() -> None:
    idle = [500 * M, 200 * M]  # charges of idle containers, the first evicted first
    cap = capacity(max_live=10, budget=2 * G, evictable=idle)
    for charge in (500 * M, 200 * M, 1000 * M):
        await cap.acquire(1536 * M, 0.05, "x", charge=charge)
    await cap.acquire(1536 * M, 0.05, "x", charge=600 * M)  # 2300 MiB: the 500 MiB idle one is evicted
    assert idle == [200 * M] and (cap.live, cap.live_bytes) == (3, 1800 * M)
    with pytest.raises(MemoryLimitRefused, match="needs 3g .* whole memory budget of 2g"):
        await cap.acquire(3 * G, 0.05, "memory_limit '2560m'", charge=100 * M)  # its caps never fit

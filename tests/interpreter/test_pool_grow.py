"""The pool's growth under load: spares that follow demand, bounded by the memory budget and the
most containers, falling back once demand goes away; starts bounded in number; a burst all answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interpreter_service.api import PoolExhausted
from interpreter_service.pool import PoolConfig, WorkerPool


def small_pool(dist_dir: Path, **overrides: object) -> WorkerPool:
    """Bare interpreters (no numpy preloaded: quicker starts), 256 MiB heaps (512 MiB a worker)."""
    fields: dict[str, object] = {
        "workers": 1,
        "spares": 0,
        "max_workers": 4,
        "max_spares": 3,
        "max_starting": 2,
        "dist_dir": dist_dir,
        "preload": (),
        "memory_limit": "256m",
        "js_heap_mb": 256,
        "start_timeout_s": 120,
        "queue_timeout_s": 240,
    }
    return WorkerPool(PoolConfig(**{**fields, **overrides}))  # type: ignore[arg-type]


def test_spare_target_is_bounded_by_the_budget_and_the_most_containers(dist_dir: Path) -> None:
    """No worker started: the warm target the pool computes from its demand, live containers and budget."""
    # At their caps (512 MiB a worker), as the budget counted before it counted use: room for 4 workers.
    pool = small_pool(dist_dir, max_workers=6, max_spares=8, memory_budget="2g", budget_counts="caps")
    assert pool._target_idle() == 1  # no demand: the warm set
    for _ in range(6):
        pool.demand.note_take()
    assert pool.spare_target() == 6
    assert pool._target_idle() == 4  # the budget holds 4 workers of 512 MiB
    pool._capacity.live, pool._capacity.live_bytes = 3, 3 * (512 << 20)
    assert pool._target_idle() == 1  # room for one more in the budget
    pool = small_pool(dist_dir, max_workers=4, max_spares=8, memory_budget="8g")
    for _ in range(6):
        pool.demand.note_take()
    pool._capacity.live, pool._capacity.live_bytes = 3, 3 * (512 << 20)
    assert pool._target_idle() == 1  # only one more container may ever live
    assert small_pool(dist_dir, max_spares=0, spares=1).spare_target() == 1  # fixed spares


@pytest.mark.sandbox
@pytest.mark.slow
async def test_a_burst_is_answered_raises_the_spares_and_they_fall_back(dist_dir: Path) -> None:
    """A burst of 3 on a pool of 1 warm worker: all answered, never more than 2 starts at once; the pool then
    keeps 3 spares, and back to 1 once the demand window passed (its clock moved on)."""
    async with asyncio.timeout(400), small_pool(dist_dir, demand_window_s=600.0, reap_interval_s=0.5) as pool:
        clock = pool.demand.clock

        async def one() -> str:
            info = await pool.create_container()
            r = await pool.execute(info.id, "print(6 * 7)")
            assert r.error is None and r.logs.strip() == "42", r
            return info.id

        ids = await asyncio.gather(*(one() for _ in range(3)))
        assert pool.stats()["spare_target"] == 3 and pool.stats()["demand_peak"] == 3
        await asyncio.gather(*(pool.delete_container(cid) for cid in ids))
        await pool.wait_warm(300)
        assert pool.stats()["workers_idle"] == 3  # the spares the burst called for
        pool.demand.clock = lambda: clock() + 10_000.0  # the window has passed without takes
        async with asyncio.timeout(30):
            while pool.stats()["workers_idle"] > 1:  # the reaper's round kills the surplus
                await asyncio.sleep(0.2)
        stats = pool.stats()
        assert stats["spare_target"] == 0 and stats["demand_peak"] == 0 and stats["workers_idle"] == 1
        assert pool._warm.peak_starting <= 2 and stats["start_limit"] == 2


@pytest.mark.sandbox
@pytest.mark.slow
async def test_a_budget_that_counts_use_admits_several_where_counting_caps_admits_one(dist_dir: Path) -> None:
    """A 2 GiB budget, workers with a 1 GiB heap (caps: 1.5 GiB). Counting caps, one container fits and a
    second waits in vain; counting use (a bare worker holds a few hundred MiB), four live at once, each runs
    code, and what they are charged stays within the budget."""
    sizes: dict[str, object] = {"memory_limit": "1g", "js_heap_mb": 512, "memory_budget": "2g"}
    sizes |= {"max_workers": None, "max_spares": 0}
    async with (
        asyncio.timeout(400),
        small_pool(dist_dir, budget_counts="caps", queue_timeout_s=1, **sizes) as caps,
    ):
        assert caps.max_containers == 1  # 2 GiB / 1.5 GiB
        held = await caps.create_container()
        caps.pin(held.id)
        with pytest.raises(PoolExhausted, match=r"all 1 in use, 1536m of the 2g memory budget"):
            await caps.create_container()
    async with asyncio.timeout(400), small_pool(dist_dir, **sizes) as use:
        assert use.max_containers == 6  # 2 GiB / 320 MiB, the reserve before any worker was measured
        ids = [(await use.create_container()).id for _ in range(4)]
        for cid in ids:
            use.pin(cid)  # in use: none is evicted for another
        results = await asyncio.gather(*(use.execute(cid, "sum(range(10**6))") for cid in ids))
        assert [r.logs for r in results] == ["499999500000\n"] * 4
        await asyncio.sleep(0.6)  # a watchdog round or two: each worker measured and charged
        stats = use.stats()
        assert stats["containers_live"] == 4 and stats["waiters"] == 0
        assert 0 < stats["worker_reserve_bytes"] < 1536 << 20  # the largest RSS of the workers when ready,
        assert stats["worker_reserve_bytes"] != 320 << 20  # no longer the reserve assumed before
        assert 4 * stats["worker_reserve_bytes"] <= stats["memory_reserved_bytes"] <= 2 << 30
        assert 0 < stats["memory_used_bytes"] <= stats["memory_reserved_bytes"]


@pytest.mark.sandbox
async def test_a_container_may_get_its_worker_in_the_background(dist_dir: Path) -> None:
    """`wait_for_worker=False` with no warm worker: the container is answered while its worker is still
    starting, its first call waits for it and runs; one deleted while its worker starts leaves no worker."""
    async with asyncio.timeout(300), small_pool(dist_dir) as pool:
        await pool.wait_warm()
        first = await pool.create_container()  # takes the only warm worker
        assert pool.stats()["workers_idle"] == 0
        later = await pool.create_container(wait_for_worker=False)
        assert pool._containers[later.id].worker is None  # answered before any worker was had
        assert pool.stats()["workers_starting"] >= 1
        started = pool.stats()["workers_started"]
        async with asyncio.timeout(5):
            while pool.stats()["worker_waiters"] < 1:  # its worker is got in the background: it waits
                await asyncio.sleep(0.01)
        r = await pool.execute(later.id, "x = 6 * 7\nprint(x)")
        assert r.logs == "42\n" and not r.worker_restarted, (r.error, r.logs)
        stats = pool.stats()
        assert stats["worker_waiters"] == 0 and stats["workers_started"] > started, stats
        assert (await pool.execute(later.id, "print(x + 1)")).logs == "43\n"  # the same worker kept
        gone = await pool.create_container(wait_for_worker=False)
        await pool.delete_container(gone.id)
        await pool._warm.wait_started(120)
        await asyncio.gather(*pool._binder.pending)
        live = {id(c.worker) for c in pool._containers.values()}
        assert set(pool._containers) == {first.id, later.id} and len(live) == 2
        assert pool.stats()["containers_live"] == 2


@pytest.mark.sandbox
async def test_a_burst_admitted_at_once_takes_the_warm_workers_none_killed(dist_dir: Path) -> None:
    """Three containers admitted at once on three warm workers, each bound in the background (as the server
    admits a burst): each takes a warm worker, none is killed as surplus and none waits for a start. Before,
    the first bind counted all three admitted containers as served, killed the two idle workers the others
    were about to take, and they waited for starts."""
    async with asyncio.timeout(300), small_pool(dist_dir, workers=3, max_workers=3) as pool:
        await pool.wait_warm()
        warm = {w.pid for w in pool._warm.idle}
        assert len(warm) == 3 and pool._target_idle() == 3
        started = pool.stats()["workers_started"]
        assert started == 3
        infos = [await pool.create_container(wait_for_worker=False) for _ in range(3)]
        assert pool._about_to_take() == 3 and pool._target_idle() == 3  # all three still to take theirs
        await asyncio.gather(*pool._binder.pending)
        bound = {pool._containers[i.id].worker.pid for i in infos}  # type: ignore[union-attr]
        stats = pool.stats()
        assert bound == warm and stats["workers_started"] == started, (bound, warm, stats)
        assert stats["worker_waiters"] == 0 and stats["workers_starting"] == 0, stats
        results = await asyncio.gather(*(pool.execute(i.id, "print(6 * 7)") for i in infos))
        assert [r.logs for r in results] == ["42\n"] * 3
        assert pool._target_idle() == 0 and pool.stats()["workers_idle"] == 0


@pytest.mark.sandbox
async def test_a_start_a_caller_waits_for_imports_nothing_ahead(dist_dir: Path) -> None:
    """The warm worker imported the preload; the one a caller waited for did not (its code imports what it
    uses, and it works); the spare started once nobody waits imports it again."""
    async with asyncio.timeout(300), small_pool(dist_dir, preload=("numpy",), max_spares=0) as pool:
        await pool.wait_warm()
        warm = await pool.create_container()
        cold = await pool.create_container()  # no warm worker left: waits for a start
        workers = {cid: pool._containers[cid].worker for cid in (warm.id, cold.id)}
        assert "import_numpy" in workers[warm.id].phases, workers[warm.id].phases
        assert "import_numpy" not in workers[cold.id].phases, workers[cold.id].phases
        r = await pool.execute(cold.id, "import numpy\nprint(numpy.arange(4).sum())")
        assert r.logs == "6\n", (r.error, r.logs)
        await pool.delete_container(warm.id)
        await pool.delete_container(cold.id)
        await pool.wait_warm()
        assert [("import_numpy" in w.phases) for w in pool._warm.idle] == [True]

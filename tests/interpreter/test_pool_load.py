"""The pool under load, with real workers: waiting for a container (FIFO, bounded, cancellable), growing up to
the maximum and back, the memory budget, stats and the execution hook."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from interpreter_service.api import ContainerNotFound, MemoryLimitRefused, PoolExhausted
from interpreter_service.pool import PoolConfig, WorkerPool

pytestmark = pytest.mark.sandbox


def small_pool(dist_dir: Path, **overrides: object) -> WorkerPool:
    """Bare interpreters (no numpy preloaded: quicker starts), 256 MiB heaps."""
    fields: dict[str, object] = {
        "workers": 1,
        "spares": 0,
        "max_workers": 1,
        "dist_dir": dist_dir,
        "preload": (),
        "memory_limit": "256m",
        "js_heap_mb": 256,
        "start_timeout_s": 120,
    }
    return WorkerPool(PoolConfig(**{**fields, **overrides}))  # type: ignore[arg-type]


async def test_callers_beyond_the_pool_wait_their_turn_and_all_complete(dist_dir: Path) -> None:
    """Pool of 1 (warm 1, max 1): three callers that each create a container, run code and delete it, as a
    response does (pinning it meanwhile), all complete, served in the order they asked."""
    order: list[int] = []
    async with asyncio.timeout(300), small_pool(dist_dir, queue_timeout_s=240) as pool:

        async def caller(i: int) -> str:
            c = await pool.create_container()
            pool.pin(c.id)
            order.append(i)
            try:
                r = await pool.execute(
                    c.id, f"import time\ntime.sleep(0.3)\nseen = 'x' in globals()\nx = {i}\nseen"
                )
                assert r.ok, r.error
                return r.logs
            finally:
                await pool.delete_container(c.id)
                pool.unpin(c.id)  # (a no-op now; unpinned first, it would be evicted for the next caller)

        tasks = [asyncio.create_task(caller(i)) for i in range(3)]
        for _ in range(100):  # the two others queue behind the first
            if pool.stats()["waiters"] == 2:
                break
            await asyncio.sleep(0.05)
        assert pool.stats()["waiters"] == 2 and pool.stats()["containers_live"] == 1
        assert await asyncio.gather(*tasks) == ["False\n"] * 3  # each a fresh interpreter
        assert order == [0, 1, 2]
        stats = pool.stats()
        assert stats["waiters"] == 0 and stats["containers_live"] == 0 and stats["restarts"] == {}


async def test_waiting_past_the_queue_timeout_and_a_cancelled_waiter(dist_dir: Path) -> None:
    async with asyncio.timeout(240), small_pool(dist_dir, queue_timeout_s=1.0) as pool:
        a = await pool.create_container()
        pool.pin(a.id)  # in use by someone between calls: not evictable
        with pytest.raises(PoolExhausted, match="no code-interpreter container became free within 1 s"):
            await pool.create_container()
        assert pool.stats()["waiters"] == 0
        # A waiter that goes away leaves the queue, and the room granted later is not lost.
        pool.queue_timeout_s = 60
        waiting = asyncio.create_task(pool.create_container())
        for _ in range(100):
            if pool.stats()["waiters"] == 1:
                break
            await asyncio.sleep(0.02)
        assert pool.stats()["waiters"] == 1
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool.stats()["waiters"] == 0 and pool.stats()["containers_live"] == 1
        await pool.delete_container(a.id)
        b = await pool.create_container()
        assert (await pool.execute(b.id, "1 + 1")).logs == "2\n"
        assert pool.stats()["containers_live"] == 1


async def test_an_unpinned_idle_container_is_evicted_for_a_waiter(dist_dir: Path) -> None:
    async with asyncio.timeout(240), small_pool(dist_dir, queue_timeout_s=60) as pool:
        a = await pool.create_container()
        busy = asyncio.create_task(pool.execute(a.id, "import time\ntime.sleep(2)"))
        await asyncio.sleep(0.3)
        b = await pool.create_container()  # waits until `a` is idle, then takes its room
        assert (await busy).ok
        with pytest.raises(ContainerNotFound):
            await pool.get_container(a.id)
        assert (await pool.execute(b.id, "'ok'")).logs == "'ok'\n"


async def test_the_pool_grows_to_its_maximum_and_shrinks_back(dist_dir: Path) -> None:
    # Fixed spares (max_spares=0): it shrinks back at once; spares that follow demand: test_pool_grow.py.
    pool = small_pool(dist_dir, max_workers=3, queue_timeout_s=1.0, max_spares=0)
    async with asyncio.timeout(300), pool:
        assert pool.stats()["workers_idle"] == 1
        cids = [(await pool.create_container()).id for _ in range(3)]  # 2 started on demand
        assert pool.stats()["containers_live"] == 3
        results = await asyncio.gather(*(pool.execute(c, "21 * 2") for c in cids))
        assert [r.logs for r in results] == ["42\n"] * 3
        for c in cids:
            pool.pin(c)
        with pytest.raises(PoolExhausted):
            await pool.create_container()
        for c in cids:
            pool.unpin(c)
            await pool.delete_container(c)
        await pool.wait_warm()
        stats = pool.stats()
        assert stats["containers_live"] == 0 and stats["workers_idle"] + stats["workers_starting"] == 1


async def test_the_memory_budget_bounds_what_containers_ask_for(dist_dir: Path) -> None:
    # Each default worker may use 256 MiB of wasm heap + 256 MiB of JS heap: 512 MiB of a 1.5 GiB budget
    # that counts caps (the budget that counts use: test_pool_grow.py).
    pool = small_pool(dist_dir, memory_budget="1536m", max_workers=None, budget_counts="caps")
    async with asyncio.timeout(300), pool:
        assert pool.max_containers == 3  # the default: budget / one worker's memory
        with pytest.raises(MemoryLimitRefused, match="32-bit WebAssembly"):
            await pool.create_container(memory_limit="16g")
        with pytest.raises(MemoryLimitRefused, match="more than the sandbox's whole memory budget"):
            await pool.create_container(memory_limit="4g")
        with pytest.raises(MemoryLimitRefused):
            pool.check_memory_limit("64g")
        pool.check_memory_limit("1g")  # fits the budget when nothing else runs
        a = await pool.create_container()
        pool.pin(a.id)
        pool.queue_timeout_s = 1.0
        with pytest.raises(PoolExhausted, match="memory budget"):  # 512m + 1.25g > 1.5g: waits, in vain
            await pool.create_container(memory_limit="1g")
        await pool.delete_container(a.id)
        big = await pool.create_container(memory_limit="1g")  # a dedicated worker with a 1 GiB heap
        assert big.memory_limit == "1g"
        worker = pool._containers[big.id].worker
        assert worker is not None
        argv = Path(f"/proc/{worker.pid}/cmdline").read_bytes().decode()
        assert "--wasm-max-mem-pages=16384," in argv  # 1 GiB of 64 KiB pages
        await pool.wait_warm()  # the warm worker started when `a` went is stopped: its room is taken
        stats = pool.stats()
        assert stats["memory_reserved_bytes"] <= stats["memory_budget_bytes"] == 1536 << 20
        assert stats["workers_idle"] + stats["workers_starting"] == 0  # no room left for a warm spare
        assert (await pool.execute(big.id, "len(bytearray(600 * 2**20))")).logs == "629145600\n"


async def test_stats_count_restarts_by_cause_and_the_hook_sees_every_execution(dist_dir: Path) -> None:
    seen: list[tuple[float, str]] = []
    async with asyncio.timeout(240), small_pool(dist_dir, grace_s=1.0) as pool:
        pool.on_execution = lambda seconds, outcome: seen.append((seconds, outcome))
        c = (await pool.create_container()).id
        await pool.execute(c, "1")
        await pool.execute(c, "1 / 0")
        await pool.execute(c, "while True: pass", timeout_s=0.5)
        worker = pool._containers[c].worker
        assert worker is not None and worker.pid is not None
        busy = asyncio.create_task(pool.execute(c, "import time\ntime.sleep(30)"))
        await asyncio.sleep(0.5)
        os.kill(worker.pid, signal.SIGKILL)
        r = await busy
        assert r.error_kind == "crashed" and r.worker_restarted
        await pool.execute(c, "from pyodide.code import run_js\nrun_js('while (true) {}')", timeout_s=0.5)
        assert [o for _, o in seen] == ["ok", "exception", "timeout", "crashed", "timeout"]
        assert all(s >= 0 for s, _ in seen)
        stats = pool.stats()
        assert stats["restarts"] == {"crash": 1, "timeout": 1}  # the interrupted loop kept its worker
        assert (
            stats["containers_live"] == 1 and stats["containers_busy"] == 0 and stats["start_failures"] == 0
        )

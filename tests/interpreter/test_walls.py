"""Hostile code against the OS limits around each worker: off-heap memory, threads, code left running.

Each attack goes through `import js` (Pyodide's bridge to the JS runtime), where WebAssembly's and V8's own
caps do not reach. Every test runs twice: with the strongest mechanism this host allows ("auto": a cgroup per
worker where we may make one) and with none ("none": RLIMIT_DATA and the pool's watchdog only).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from interpreter_service.dist.start_cache import START_DIR
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.process.confine import detect
from interpreter_service.process.procfs import proc_status

pytestmark = pytest.mark.sandbox

# Off-heap buffers, each filled so that its pages are really used: 1 GiB in all, against a worker whose whole
# memory may be 256 MiB (wasm) + 128 MiB (JS heap) + the runtime's 256 MiB.
UINT8ARRAYS = """
import js
held = []
for i in range(8):
    a = js.Uint8Array.new(128 << 20)
    a.fill(1)
    held.append(a)
print("allocated", len(held))
"""
WASM_MEMORIES = """
import js
held = []
for i in range(8):
    m = js.WebAssembly.Memory.new(js.Object.fromEntries([["initial", 2048]]))  # 2048 pages: 128 MiB
    js.Uint8Array.new(m.buffer).fill(1)
    held.append(m)
print("allocated", len(held))
"""
# Threads the JS runtime gives without any permission: node:worker_threads through a dynamic import.
THREADS = """
from pyodide.code import run_js
started = await run_js('''(async () => {
  const { Worker } = await import("node:worker_threads");
  globalThis.held = [];
  for (let i = 0; i < N; i++) globalThis.held.push(new Worker(BODY, { eval: true }));
  return globalThis.held.length;
})()''')
print("started", started)
"""
SPIN = "'for (;;) {}'"
IDLE = "'setInterval(() => {}, 1000)'"


def threads(n: int, body: str) -> str:
    return THREADS.replace("N", str(n)).replace("BODY", body)


@pytest.fixture(params=["auto", "none"], scope="module")
async def walled(request: pytest.FixtureRequest, dist_dir: Path) -> AsyncIterator[WorkerPool]:
    pool = WorkerPool(
        PoolConfig(
            workers=2,
            spares=1,
            memory_limit="256m",
            js_heap_mb=128,
            preload=(),
            timeout_s=20,
            dist_dir=dist_dir,
            isolation=request.param,
        )
    )
    async with asyncio.timeout(120):
        await pool.start()
    try:
        yield pool
    finally:
        await pool.aclose()


async def _bystander(pool: WorkerPool, c: str, stop: asyncio.Event) -> list[float]:
    """Container `c` running code until `stop`, and for at least 3 calls (an attack refused at once can be
    over before the second); the time of each of its calls."""
    times: list[float] = []
    while not stop.is_set() or len(times) < 3:
        r = await pool.execute(c, "6 * 7", timeout_s=10)
        assert r.ok and r.logs == "42\n", r
        times.append(r.duration_s)
        await asyncio.sleep(0.1)
    return times


async def _attack(pool: WorkerPool, code: str, timeout_s: float = 15) -> tuple[str, str]:
    """Run `code` in a fresh container while another container answers; (its logs + error, what happened to
    its worker after a few seconds: "alive" or the reason it died)."""
    other = (await pool.create_container()).id
    c = (await pool.create_container()).id
    worker = pool._containers[c].worker
    assert worker is not None
    stop = asyncio.Event()
    bystander = asyncio.create_task(_bystander(pool, other, stop))
    try:
        await asyncio.sleep(0.3)  # it answers before the attack starts
        r = await pool.execute(c, code, timeout_s=timeout_s)
        for _ in range(20):  # the watchdog's verdict on what the code left running
            if not worker.alive:
                break
            await asyncio.sleep(0.25)
    finally:
        stop.set()
        times = await bystander
    assert len(times) >= 3 and max(times) < 5, f"the other container stalled: {times}"
    await asyncio.gather(pool.delete_container(c), pool.delete_container(other))
    return f"{r.logs}{r.error or ''}", ("alive" if worker.alive else worker.exit_reason)


@pytest.mark.parametrize("code", [UINT8ARRAYS, WASM_MEMORIES], ids=["uint8array", "wasm_memory"])
async def test_off_heap_memory_past_the_cost_is_refused_or_killed(walled: WorkerPool, code: str) -> None:
    async with asyncio.timeout(120):
        said, fate = await _attack(walled, code)
    assert "allocated 8" not in said, f"1 GiB off-heap in a 640 MiB worker: {said!r}"
    refused = "RangeError" in said or "out of memory" in said.lower()
    killed = "memory" in fate and ("killed by the kernel" in fate or "killed by the sandbox" in fate)
    assert refused or killed, (said, fate)


async def test_a_fork_of_threads_is_refused(walled: WorkerPool) -> None:
    assert walled.cfg.max_tasks < 160
    async with asyncio.timeout(120):
        said, fate = await _attack(walled, threads(160, IDLE), timeout_s=60)
    assert not ("started 160" in said and fate == "alive"), (said, fate)  # refused, or the worker killed


async def test_no_thread_survives_a_timeout(walled: WorkerPool) -> None:
    # A 1g container: a JS thread's isolate reserves about 550 MB of data, more than a 256m worker's
    # RLIMIT_DATA leaves, which would end the worker before its thread ran (tested above as a refusal).
    c = (await walled.create_container(memory_limit="1g")).id
    worker = walled._containers[c].worker
    assert worker is not None
    async with asyncio.timeout(120):
        await walled.execute(c, "x = 1")
        r = await walled.execute(c, threads(1, SPIN) + "\nwhile True:\n    pass\n", timeout_s=3)
        assert r.error_kind == "timeout", r
        for _ in range(40):
            if not worker.alive:
                break
            await asyncio.sleep(0.25)
        assert not worker.alive, f"a thread left spinning after the timeout: {proc_status(worker.pid)}"
        assert "no call in flight" in worker.exit_reason, worker.exit_reason
        r = await walled.execute(c, "'x' in globals()")
        assert r.ok and r.worker_restarted and "earlier state was lost" in r.logs, r
        assert r.logs.endswith("False\n")
    await walled.delete_container(c)


async def test_the_distribution_is_read_only_and_not_linked(walled: WorkerPool) -> None:
    dist = walled.cfg.dist_dir
    files = [p for p in dist.rglob("*") if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in files)
    # only the start cache, read-only to all where setup made it, is hard-linked (same inode, same 0444)
    linked = [p for p in files if p.stat().st_nlink != 1]
    assert all(p.relative_to(dist).parts[0] == START_DIR for p in linked), (
        "a file is a link to a writable original"
    )
    folders = [dist, *(p for p in dist.rglob("*") if p.is_dir())]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o555 for p in folders)


async def test_the_mechanism_is_named(walled: WorkerPool) -> None:
    stats = walled.stats()
    assert stats["isolation"] == walled.cfg.confiner.name
    assert walled.isolation.startswith(
        {"cgroup1": "cgroup v1", "cgroup2": "cgroup v2", "none": "no cgroup"}[stats["isolation"]]
    )
    if walled.config.isolation == "none":
        assert stats["isolation"] == "none"
    elif os.geteuid() == 0:  # root may make cgroups wherever the hierarchy is writable: expect one here
        probe = detect("auto")
        with contextlib.suppress(Exception):
            probe.close()
        assert stats["isolation"] == probe.name

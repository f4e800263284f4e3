"""Measure the interpreter's start-up and round-trip numbers on this machine (prints a small table)."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from interpreter_service.distribution import default_dist_dir  # noqa: E402
from interpreter_service.pool import WorkerPool  # noqa: E402
from interpreter_service.worker import WorkerConfig, WorkerProcess  # noqa: E402

__all__: list[str] = []


async def main() -> None:
    dist = default_dist_dir()
    print(f"loadavg at start: {os.getloadavg()}")
    for preload in ((), ("numpy", "matplotlib")):
        w = WorkerProcess(WorkerConfig(dist_dir=dist, preload=preload))
        await w.start()
        print(f"worker start to ready, preload={preload or 'none'}: {w.ready_s:.2f} s, RSS {w.rss_bytes() >> 20} MiB")
        await w.kill()
    async with WorkerPool(workers=1, spares=0, dist_dir=dist) as pool:
        t0 = time.perf_counter()
        c = await pool.create_container()
        print(f"create_container from a warm pool: {(time.perf_counter() - t0) * 1000:.1f} ms")
        ts = []
        for _ in range(200):
            t0 = time.perf_counter()
            await pool.execute(c.id, "print(1)")
            ts.append(time.perf_counter() - t0)
        print(f"print(1) round trip: median {statistics.median(ts) * 1000:.2f} ms, p90 "
              f"{sorted(ts)[179] * 1000:.2f} ms (n=200)")
        t0 = time.perf_counter()
        r = await pool.execute(c.id, "import matplotlib.pyplot as plt\nplt.plot(range(10))")
        print(f"matplotlib line plot to PNG: {(time.perf_counter() - t0) * 1000:.0f} ms ({len(r.images[0])} bytes)")
        t0 = time.perf_counter()
        r = await pool.execute(c.id, "while True: pass", timeout_s=0.5)
        print(f"timeout 0.5 s + interrupt: call returned after {(time.perf_counter() - t0) * 1000:.0f} ms "
              f"({r.error_kind})")
    print(f"loadavg at end: {os.getloadavg()}")


if __name__ == "__main__":
    asyncio.run(main())

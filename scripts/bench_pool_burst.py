"""Pool burst benchmark: first-cell latency when many new containers arrive at once.

A pool of 1 warm worker gets a burst of N new containers at once (each: create_container, then its first
cell, `--cell`: `print(1)` by default, or one importing numpy or plotting with matplotlib; its latency is
from the burst's start to that cell's result), then, once the pool has settled (no start in progress) and a
short pause, a second burst of N. Configurations, each a fresh pool (workers=1, spares=0): `before` (fixed
spares, every needed worker starting at once: the baseline), `start_limit` (fixed spares, at
most one start per core), `adaptive_preloaded` (spares that follow demand and the start limit, every start
preloading numpy and matplotlib) and `adaptive` (the defaults: as the former, but a start a caller waits for
imports nothing ahead). Reported per burst: first-cell p50 / p95 / max, and the pool's spare target after
it. [Issue target: a burst of 6 on a pool of 1 warm worker answered at first-cell p50 <= 3 s.]
Run: `python scripts/bench_pool_burst.py [--quick] [--bursts 6,32] [--cell print|numpy|matplotlib]
[--configs before,start_limit,adaptive_preloaded,adaptive] [--out bench-results]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import machine_info, percentile, write_json

from interpreter_service.dist.distribution import default_dist_dir
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.pool.capacity import available_cores

__all__ = ["main", "summary"]

UNBOUNDED = 1 << 30
CONFIGS: dict[str, dict[str, Any]] = {
    "before": {"max_spares": 0, "max_starting": UNBOUNDED, "preload_on_demand": True},
    "start_limit": {"max_spares": 0, "preload_on_demand": True},
    "adaptive_preloaded": {"preload_on_demand": True},
    "adaptive": {},
}
# The first cell of each container (each prints 1): the code a burst runs, with the imports it needs.
CELLS = {
    "print": "print(1)",
    "numpy": "import numpy\nprint(int(numpy.ones(1).sum()))",
    "matplotlib": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint(1)",
}


def summary(latencies: list[float]) -> dict[str, Any]:
    """First-cell latencies (seconds) as n, p50, p95 and max, rounded to 10 ms."""

    def r(v: float | None) -> float | None:
        return round(v, 2) if v is not None else None

    return {
        "n": len(latencies),
        "p50_s": r(percentile(latencies, 50)),
        "p95_s": r(percentile(latencies, 95)),
        "max_s": r(max(latencies) if latencies else None),
    }


async def burst(pool: WorkerPool, n: int, cell: str = CELLS["print"]) -> tuple[list[float], list[str]]:
    """N containers at once, each running `cell`: their first-cell latencies and ids."""
    t0 = time.perf_counter()

    async def one() -> tuple[float, str]:
        info = await pool.create_container()
        r = await pool.execute(info.id, cell)
        if r.error or r.logs.strip() != "1":
            raise RuntimeError(f"the cell failed: {r.error or r.logs!r}")
        return time.perf_counter() - t0, info.id

    done = await asyncio.gather(*(one() for _ in range(n)))
    return [s for s, _ in done], [cid for _, cid in done]


async def run_config(
    name: str, n: int, pause_s: float, preload: tuple[str, ...], cell: str = CELLS["print"]
) -> dict[str, Any]:
    """A fresh pool of 1 warm worker in configuration `name`: two bursts of `n`, settled and paused between."""
    dist = default_dist_dir()
    pool = WorkerPool(
        PoolConfig(
            workers=1,
            spares=0,
            max_workers=max(n, 2),
            memory_budget=f"{max(n, 2) * 2}g",  # the caps, not what the workers use (a few hundred MB each)
            memory_limit="512m",
            js_heap_mb=512,
            queue_timeout_s=600,
            start_timeout_s=300,
            dist_dir=dist,
            preload=preload,
            **CONFIGS[name],
        )
    )
    out: dict[str, Any] = {"max_spares": pool.max_spares, "max_starting": min(pool.max_starting, n)}
    async with pool:
        for label in ("first", "second"):
            lat, ids = await burst(pool, n, cell)
            stats = pool.stats()
            out[label] = {**summary(lat), "spare_target_after": stats.get("spare_target")}
            out[label]["peak_starts_at_once"] = pool._warm.peak_starting
            await asyncio.gather(*(pool.delete_container(cid) for cid in ids))
            if label == "first":
                t = time.perf_counter()
                await pool.wait_warm(600)
                await asyncio.sleep(pause_s)
                out["pause_s"] = round(time.perf_counter() - t, 1)
                out["idle_before_second"] = pool.stats()["workers_idle"]
    return out


async def bench(
    quick: bool, sizes: list[int], configs: list[str], pause_s: float, cell: str = "print"
) -> dict[str, Any]:
    preload: tuple[str, ...] = () if quick else ("numpy", "matplotlib")
    result: dict[str, Any] = {
        "benchmark": "pool_burst",
        "machine": machine_info(),
        "quick": quick,
        "cores": available_cores(),
        "preload": list(preload),
        "cell": cell,
        "bursts": {},
    }
    for n in sizes:
        result["bursts"][str(n)] = {}
        for name in configs:
            print(f"burst of {n}: {name} ...", file=sys.stderr, flush=True)
            result["bursts"][str(n)][name] = await run_config(name, n, pause_s, preload, CELLS[cell])
    six = result["bursts"].get("6", {}).get("adaptive")
    if six is not None:
        result["checks"] = {"burst_6_first_p50_le_3s": six["first"]["p50_s"] <= 3}
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="a burst of 3, bare interpreters, before vs adaptive"
    )
    ap.add_argument("--bursts", default="6,32", help="comma-separated burst sizes")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"some of {','.join(CONFIGS)}")
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between bursts, once the pool settled")
    ap.add_argument("--cell", default="print", choices=sorted(CELLS), help="each container's first cell")
    ap.add_argument("--out", default="bench-results", help="folder for pool_burst.json")
    ns = ap.parse_args(argv)
    sizes = [3] if ns.quick else [int(x) for x in ns.bursts.split(",")]
    configs = ["before", "adaptive"] if ns.quick else ns.configs.split(",")
    result = asyncio.run(bench(ns.quick, sizes, configs, ns.pause, ns.cell))
    name = "pool_burst" if ns.cell == "print" else f"pool_burst-{ns.cell}"
    path = write_json(ns.out, f"{name}-quick" if ns.quick else name, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

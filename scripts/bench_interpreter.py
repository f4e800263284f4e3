"""Interpreter benchmark: worker start and RSS, new container from the warm pool, cell round trips, scaling.

Measures (the targets in brackets): worker start to ready, bare and with numpy + matplotlib preloaded
[<= 1.5 s], with its CPU time and the phases of the start;
RSS per worker after warm-up and after a plot [<= 300 MB]; a new container from the warm pool [<= 50 ms];
warm `print(1)` round trip p50/p99 [p50 <= 2 ms]; a numpy cell; a matplotlib cell returning a PNG
[<= 300 ms]; calls/s with 1, 2 and 4 workers on independent containers as a ratio to 1 worker (a light
`print(1)` cell and a CPU-bound cell) [near-linear up to the core count]; a `while True: pass` timeout; warm calls with the OS limits around
each worker against none, alternating in one run [a few per cent at most].
All through `WorkerPool` in this process, as the server uses it.
Run: `python scripts/bench_interpreter.py [--quick] [--out bench-results]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import machine_info, percentile, write_json

from interpreter_service.dist.distribution import default_dist_dir
from interpreter_service.dist.start_cache import ARTIST_DOCS, START_DIR
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerProcess

__all__ = ["main"]

NUMPY_CELL = "import numpy as np\na = np.arange(250_000, dtype=np.float64).reshape(500, 500)\nprint(float((a @ a).sum()))"
PLOT_CELL = (
    "import matplotlib.pyplot as plt\nplt.plot(range(10), [x * x for x in range(10)])\nplt.title('squares')"
)
# How long a worker sits idle before its "idle" RSS is read: it collects its garbage 0.3 s into a quiet spell.
IDLE_S = 0.8
CPU_CELL = "s = 0\nfor i in range(100_000):\n    s += i * i\nprint(s)"


def ms(values: list[float], q: float) -> float | None:
    v = percentile(values, q)
    return round(v * 1000, 2) if v is not None else None


async def timed_calls(pool: WorkerPool, cid: str, code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await pool.execute(cid, code)
        out.append(time.perf_counter() - t0)
        if r.error:
            raise RuntimeError(f"cell failed: {r.error}")
    return out


def cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system, all threads) a process has used so far; 0.0 when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _linked_copy(dist: Path, into: Path, leave_out: Callable[[str, list[str]], Iterable[str]]) -> Path:
    """A copy of the distribution (hard links where it can) leaving out what `leave_out` names."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    into.mkdir(parents=True, exist_ok=True)
    copy = into / "pyodide"
    shutil.copytree(dist, copy, ignore=leave_out, copy_function=link_or_copy)
    return copy


def anon_mib(pid: int | None) -> float | None:
    """A process's anonymous memory (`Anonymous:` of `smaps_rollup`: its heaps, WebAssembly memory and JS
    heap), MiB: what one more worker adds on a host where others run. RSS also counts the pages of the Deno
    binary it has touched, which every worker shares (a lone worker's count them as private)."""
    try:
        rows = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return None
    kib = sum(int(r.split()[1]) for r in rows if r.startswith("Anonymous:"))
    return round(kib / 1024, 1)


def font_cache_only(dist: Path, into: Path) -> Path:
    """A copy of the distribution whose start cache holds matplotlib's font cache only (what workers had
    before the cache held the packages and the compiled stdlib): the baseline of the start figures."""
    copy = _linked_copy(dist, into, shutil.ignore_patterns(START_DIR))
    (copy / START_DIR).mkdir()
    shutil.copyfile(dist / START_DIR / "mpl-fontlist.json", copy / START_DIR / "mpl-fontlist.json")
    return copy


def without_artist_docs(dist: Path, into: Path) -> Path:
    """A copy of the distribution whose start cache lacks the recorded matplotlib Artist docs (workers
    compute them on import): what the recording saves, on its own."""
    return _linked_copy(dist, into, shutil.ignore_patterns(ARTIST_DOCS))


def without_pyodide_js(dist: Path, into: Path) -> Path:
    """A copy of the distribution whose start cache lacks its copy of pyodide.asm.js and V8's code cache of
    it (workers evaluate the distribution's file, its dynamic linker unpatched): what those two save."""
    names = {"pyodide.asm.js", "pyodide.asm.js.v8cache"}

    def leave_out(folder: str, files: list[str]) -> list[str]:
        return [f for f in files if f in names] if Path(folder).name == START_DIR else []

    return _linked_copy(dist, into, leave_out)


async def one_start(dist: Path, preload: tuple[str, ...]) -> dict[str, Any]:
    """One worker start: ready, CPU time, RSS when ready and after a plot, the phases."""
    w = WorkerProcess(WorkerConfig(dist_dir=dist, preload=preload))
    await w.start()
    try:
        out = {"ready": w.ready_s, "cpu": cpu_seconds(w.pid), "rss": (w.rss_bytes() or 0) / 2**20}
        out["anon"] = anon_mib(w.pid)
        out["phases"] = w.phases
        await asyncio.sleep(IDLE_S)
        out["rss_idle"] = (w.rss_bytes() or 0) / 2**20
        r = await w.execute(PLOT_CELL, timeout_s=120)
        out["rss_plot"] = (w.rss_bytes() or 0) / 2**20 if r.ok else None
        return out
    finally:
        await w.kill()


async def worker_start(dist: Path, repeats: int) -> dict[str, Any]:
    """Worker start to ready, bare and with numpy + matplotlib: medians of wall time, CPU time (steadier than
    wall time on a busy host), RSS when ready and after a first plot, and of each start phase (when it
    ended, ms after the process started). `start_cache`: what the distribution's start cache holds;
    `font_cache_only`: the same starts, interleaved, from a copy whose cache holds the font cache alone;
    `without_artist_docs`: from a copy whose cache lacks the recorded matplotlib Artist docs;
    `without_pyodide_js`: from a copy whose cache lacks its pyodide.asm.js and that file's V8 code cache."""
    with tempfile.TemporaryDirectory() as tmp:
        dists = {"": dist}
        if (dist / START_DIR / ARTIST_DOCS).is_file():
            dists["without_artist_docs"] = without_artist_docs(dist, Path(tmp) / "no-docs")
        if (dist / START_DIR / "mpl-fontlist.json").is_file():
            dists["font_cache_only"] = font_cache_only(dist, Path(tmp) / "fonts")
        if (dist / START_DIR / "pyodide.asm.js").is_file():
            dists["without_pyodide_js"] = without_pyodide_js(dist, Path(tmp) / "no-js")
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(repeats):
            for label, preload in (("bare", ()), ("numpy_matplotlib", ("numpy", "matplotlib"))):
                for variant, d in dists.items():
                    runs.setdefault((variant, label), []).append(await one_start(d, preload))
    start = dist / START_DIR
    out: dict[str, Any] = {"start_cache": sorted(f.name for f in start.iterdir()) if start.is_dir() else []}
    for (variant, label), starts in runs.items():
        plots = [s["rss_plot"] for s in starts if s["rss_plot"] is not None]
        figures = {
            "ready_s_p50": round(statistics.median(s["ready"] for s in starts), 2),
            "cpu_s_p50": round(statistics.median(s["cpu"] for s in starts), 2),
            "rss_mib": round(max(s["rss"] for s in starts), 1),
            "rss_idle_mib": round(max(s["rss_idle"] for s in starts), 1),
            "anon_mib": max((s["anon"] for s in starts if s["anon"] is not None), default=None),
            "rss_after_plot_mib": round(max(plots), 1) if plots else None,
            "phases_ms_p50": {
                k: statistics.median(s["phases"].get(k, 0) for s in starts) for k in starts[0]["phases"]
            },
        }
        (out.setdefault(variant, {}) if variant else out)[label] = figures
    return out


async def single_worker(dist: Path, n_print: int, n_cells: int) -> dict[str, Any]:
    async with WorkerPool(PoolConfig(workers=1, spares=1, dist_dir=dist)) as pool:
        isolation = dict(pool.stats()).get("isolation", "(no OS limits)")
        create = []
        for _ in range(n_cells):
            await pool.wait_warm()
            t0 = time.perf_counter()
            c = await pool.create_container()
            create.append(time.perf_counter() - t0)
            await pool.delete_container(c.id)
        await pool.wait_warm()
        c = await pool.create_container()
        rss_warm = max(pool.worker_rss_bytes(), default=0) / 2**20
        anon_warm = max((anon_mib(w.pid) or 0 for w in pool._workers()), default=None)
        await timed_calls(pool, c.id, "print(1)", 20)  # warm-up
        prints = await timed_calls(pool, c.id, "print(1)", n_print)
        numpy_first = await timed_calls(pool, c.id, NUMPY_CELL, 1)
        numpy = await timed_calls(pool, c.id, NUMPY_CELL, n_cells)
        t0 = time.perf_counter()
        r = await pool.execute(c.id, PLOT_CELL)
        plot_first = time.perf_counter() - t0
        png = len(r.images[0]) if r.images else 0
        plots = await timed_calls(pool, c.id, PLOT_CELL, n_cells)
        rss_after = max(pool.worker_rss_bytes(), default=0) / 2**20
        anon_after = max((anon_mib(w.pid) or 0 for w in pool._workers()), default=None)
        await asyncio.sleep(IDLE_S)
        rss_after_idle = max(pool.worker_rss_bytes(), default=0) / 2**20
        t0 = time.perf_counter()
        r = await pool.execute(c.id, "while True: pass", timeout_s=0.5)
        timeout = {"returned_after_ms": round((time.perf_counter() - t0) * 1000), "error_kind": r.error_kind}
    return {
        "isolation": isolation,
        "new_container_ms": {"p50": ms(create, 50), "max": ms(create, 100), "n": len(create)},
        "print_ms": {"p50": ms(prints, 50), "p90": ms(prints, 90), "p99": ms(prints, 99), "n": len(prints)},
        "numpy_cell_ms": {"first": ms(numpy_first, 50), "p50": ms(numpy, 50), "n": len(numpy)},
        "matplotlib_png_ms": {
            "first": round(plot_first * 1000, 1),
            "p50": ms(plots, 50),
            "n": len(plots),
            "png_bytes": png,
        },
        "rss_mib": {
            "warm_idle": round(rss_warm, 1),
            "after_plots": round(rss_after, 1),
            "after_plots_idle": round(rss_after_idle, 1),
        },
        "anon_mib": {"warm_idle": anon_warm, "after_plots": anon_after},
        "timeout_0_5s": timeout,
    }


async def scaling(dist: Path, counts: list[int], seconds: float) -> dict[str, Any]:
    """Calls/s with k workers, each looping on its own container for `seconds`, for two kinds of cell."""
    out: dict[str, Any] = {}
    async with WorkerPool(PoolConfig(workers=max(counts), spares=0, dist_dir=dist, preload=())) as pool:
        cids = [(await pool.create_container()).id for _ in range(max(counts))]
        for cid in cids:
            await timed_calls(pool, cid, CPU_CELL, 2)  # warm-up
        for label, code in (("print", "print(1)"), ("cpu", CPU_CELL)):
            rates = {}
            for k in counts:
                done = [0] * k
                stop = time.perf_counter() + seconds

                async def loop(i: int, code: str = code, stop: float = stop, done: list[int] = done) -> None:
                    while time.perf_counter() < stop:
                        await pool.execute(cids[i], code)
                        done[i] += 1

                t0 = time.perf_counter()
                await asyncio.gather(*(loop(i) for i in range(k)))
                rates[k] = sum(done) / (time.perf_counter() - t0)
            out[label] = {
                str(k): {"calls_s": round(r, 1), "ratio_to_1": round(r / rates[counts[0]], 2)}
                for k, r in rates.items()
            }
    return out


async def isolation_cost(dist: Path, rounds: int, n_print: int) -> dict[str, Any]:
    """Warm calls with the OS limits (isolation "auto": a cgroup where the host allows one) against none, in
    alternating rounds within this run: the ratio of their p50s (1.0: the limits cost nothing)."""
    times: dict[str, dict[str, list[float]]] = {m: {"print": [], "plot": []} for m in ("none", "auto")}
    async with (
        WorkerPool(PoolConfig(workers=1, spares=0, dist_dir=dist, isolation="none")) as plain,
        WorkerPool(PoolConfig(workers=1, spares=0, dist_dir=dist, isolation="auto")) as walled,
    ):
        pools = {"none": plain, "auto": walled}
        cids = {m: (await p.create_container()).id for m, p in pools.items()}
        for m, p in pools.items():
            await timed_calls(p, cids[m], PLOT_CELL, 2)  # warm-up
        for _ in range(rounds):
            for m, p in pools.items():
                times[m]["print"] += await timed_calls(p, cids[m], "print(1)", n_print)
                times[m]["plot"] += await timed_calls(p, cids[m], PLOT_CELL, 2)
        mechanism = walled.stats()["isolation"]
    out: dict[str, Any] = {"mechanism": mechanism}
    for cell in ("print", "plot"):
        none, auto = ms(times["none"][cell], 50), ms(times["auto"][cell], 50)
        ratio = round(auto / none, 3) if none and auto else None
        out[cell] = {"p50_ms_none": none, "p50_ms_with_limits": auto, "ratio": ratio}
    return out


def checks(r: dict[str, Any]) -> dict[str, bool]:
    s = r["single_worker"]
    cores = os.cpu_count() or 1
    cpu = r["scaling"]["cpu"]
    top = str(max(int(k) for k in cpu if int(k) <= cores))
    return {
        "print_p50_le_2ms": (s["print_ms"]["p50"] or 1e9) <= 2,
        "matplotlib_png_le_300ms": (s["matplotlib_png_ms"]["p50"] or 1e9) <= 300,
        "new_container_le_50ms": (s["new_container_ms"]["p50"] or 1e9) <= 50,
        "rss_le_300mb": max(s["rss_mib"].values()) * 2**20 <= 300e6,
        "idle_rss_le_200mib": s["rss_mib"]["warm_idle"] <= 200,
        "ready_with_numpy_matplotlib_le_1_5s": r["worker_start"]["numpy_matplotlib"]["ready_s_p50"] <= 1.5,
        f"cpu_scaling_at_{top}_ge_0_8_linear": cpu[top]["ratio_to_1"] >= 0.8 * int(top),
    }


async def bench(quick: bool) -> dict[str, Any]:
    dist = default_dist_dir()
    result: dict[str, Any] = {"benchmark": "interpreter", "machine": machine_info(), "quick": quick}
    result["worker_start"] = await worker_start(dist, 1 if quick else 3)
    result["single_worker"] = await single_worker(dist, 50 if quick else 500, 2 if quick else 10)
    result["scaling"] = await scaling(dist, [1, 2] if quick else [1, 2, 4], 1.0 if quick else 4.0)
    result["isolation_cost"] = await isolation_cost(dist, 2 if quick else 20, 20 if quick else 50)
    result["checks"] = checks(result)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer calls, 1 and 2 workers (about 30 s)")
    ap.add_argument("--out", default="bench-results", help="folder for interpreter.json")
    ns = ap.parse_args(argv)
    result = asyncio.run(bench(ns.quick))
    path = write_json(ns.out, "interpreter-quick" if ns.quick else "interpreter", result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

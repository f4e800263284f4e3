"""Run every benchmark one after another, then write the plots and tables into docs/benchmarks.md.

JSON goes to `bench-results/` (git-ignored), plots to `docs/bench/*.png`, tables between the markers of
docs/benchmarks.md. Run on a quiet machine: `python scripts/bench_all.py` (about 25-30 minutes on 2 CPU
cores); `--skip default` leaves out the default-model gateway run; `--model PATH` adds a gateway run on
another model (e.g. a real model on a GPU host).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main"]

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-results")
    ap.add_argument(
        "--skip", default="", help="comma-separated: gateway-tiny, default, interpreter, pool-burst, agent"
    )
    ap.add_argument("--model", action="append", default=[], help="an extra gateway model (path or name)")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument(
        "--interleave", action="store_true", help="gateway runs: all engines up, rounds alternated"
    )
    ns = ap.parse_args(argv)
    skip = set(ns.skip.split(","))
    py = sys.executable
    gw = ["--concurrency", ns.concurrency, *(["--interleave"] if ns.interleave else [])]
    runs = {
        "gateway-tiny": [py, HERE / "bench_gateway.py", "--model", "tiny", *gw],
        "default": [py, HERE / "bench_gateway.py", "--model", "default", *gw],
        "interpreter": [py, HERE / "bench_interpreter.py"],
        "pool-burst": [py, HERE / "bench_pool_burst.py"],
        "agent": [py, HERE / "bench_agent.py", "--model", "tiny"],
    }
    for i, m in enumerate(ns.model):
        runs[f"model-{i}"] = [py, HERE / "bench_gateway.py", "--model", m, *gw]
    failed = []
    for name, cmd in runs.items():
        if name in skip:
            continue
        t0 = time.monotonic()
        print(f"== {name}: {' '.join(map(str, cmd[1:]))}", flush=True)
        rc = subprocess.run(
            [*map(str, cmd), "--out", ns.out], check=False, stdout=subprocess.DEVNULL
        ).returncode
        print(f"== {name}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    subprocess.run([py, str(HERE / "bench_report.py"), "--results", ns.out, "--write-doc"], check=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""CLI: `python -m interpreter_service {setup,serve,add-package}`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interpreter_service.pool.config import PoolConfig

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m interpreter_service")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="assemble the offline Pyodide distribution (idempotent)")
    s.add_argument(
        "--dist-dir", type=Path, default=None, help="default: $VR_PYODIDE_CACHE_DIR or ~/.cache/..."
    )
    s.add_argument("--vendor-dir", type=Path, default=None)
    a = sub.add_parser("add-package", help="add pure-Python wheels (PyPI names or wheel paths) to the dist")
    a.add_argument("packages", nargs="+")
    a.add_argument("--dist-dir", type=Path, default=None)
    a.add_argument("--no-deps", action="store_true", help="do not resolve the packages' dependencies")
    _serve_arguments(sub.add_parser("serve", help="serve a worker pool over HTTP"))
    return p


def _serve_arguments(v: argparse.ArgumentParser) -> None:
    """`serve`'s flags: where it listens, the pool's size and limits, and who may call it."""
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8765)
    v.add_argument("--dist-dir", type=Path, default=None)
    v.add_argument(
        "--workers",
        type=int,
        default=os.environ.get("VR_CODE_INTERPRETER_WORKERS", "2"),  # a string default goes through `type`
        help="default: $VR_CODE_INTERPRETER_WORKERS or 2",
    )
    v.add_argument(
        "--spares", type=int, default=1, help="warm workers kept beyond the live containers, at least"
    )
    v.add_argument(
        "--max-spares",
        type=int,
        default=None,
        help="most warm spares while demand is high (default: 4 per core; --spares to keep it fixed)",
    )
    v.add_argument(
        "--max-starting", type=int, default=None, help="most worker starts at once (default: cores)"
    )
    v.add_argument("--timeout", type=float, default=30.0)
    v.add_argument("--memory-limit", default="1g")
    v.add_argument("--idle-expiry", type=float, default=1200.0)
    v.add_argument("--allow-net", default="", help="comma-separated hosts (default: no network)")
    v.add_argument(
        "--max-workers", type=int, default=None, help="default: memory budget / worker reserve (or caps)"
    )
    v.add_argument("--memory-budget", default=None, help="e.g. '8g'; default: half of the machine's memory")
    v.add_argument(
        "--budget-counts",
        choices=("use", "caps"),
        default="use",
        help="what the budget counts of each worker: use (its measured RSS, at least the worker reserve) "
        "or caps (its WebAssembly + JS heap caps)",
    )
    v.add_argument(
        "--worker-reserve",
        default=None,
        help="e.g. '320m': the least a worker is charged with --budget-counts use (default: the largest "
        "RSS of recently started workers, 320m until one is measured)",
    )
    v.add_argument("--queue-timeout", type=float, default=60.0, help="seconds to wait for a free container")
    v.add_argument("--user", default=None, help="run workers as this user; default 'nobody' when root")
    v.add_argument(
        "--isolation",
        choices=("auto", "cgroup", "none"),
        default="auto",
        help="OS limits around each worker: auto (a cgroup where the host allows one), cgroup (required), "
        "none (RLIMIT_DATA and the watchdog only)",
    )
    v.add_argument(
        "--token",
        default=None,
        help="bearer token every request must carry (default: $VR_INTERPRETER_TOKEN); "
        "required unless --host is a loopback address",
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "setup":
        from interpreter_service.dist.distribution import SetupError, setup_distribution

        try:
            setup_distribution(args.dist_dir, args.vendor_dir)
        except SetupError as e:
            print(f"setup failed: {e}", file=sys.stderr)
            return 1
        return 0
    if args.cmd == "add-package":
        from interpreter_service.dist.distribution import SetupError
        from interpreter_service.dist.packages import add_packages

        try:
            add_packages(args.packages, dist_dir=args.dist_dir, resolve_deps=not args.no_deps)
        except SetupError as e:
            print(f"add-package failed: {e}", file=sys.stderr)
            return 1
        return 0
    return _serve(args)


def _pool_config(args: argparse.Namespace) -> PoolConfig:
    """The pool `serve` runs, from its flags."""
    from interpreter_service.pool.config import PoolConfig

    return PoolConfig(
        workers=args.workers,
        spares=args.spares,
        max_spares=args.max_spares,
        max_starting=args.max_starting,
        max_workers=args.max_workers,
        memory_budget=args.memory_budget,
        budget_counts=args.budget_counts,
        worker_reserve=args.worker_reserve,
        queue_timeout_s=args.queue_timeout,
        user=args.user,
        isolation=args.isolation,
        timeout_s=args.timeout,
        memory_limit=args.memory_limit,
        idle_expiry_s=args.idle_expiry,
        dist_dir=args.dist_dir,
        allow_net=[h for h in args.allow_net.split(",") if h.strip()],
    )


def _serve(args: argparse.Namespace) -> int:
    """Run a `WorkerPool` behind the HTTP API (blocking); the exit status (2: refused to start)."""
    import uvicorn

    from interpreter_service.pool import WorkerPool
    from interpreter_service.service.app import create_app
    from interpreter_service.service.auth import TOKEN_ENV, check_bind

    token = args.token or os.environ.get(TOKEN_ENV) or None
    refusal = check_bind(args.host, token)
    if refusal is not None:
        print(f"interpreter_service: {refusal}", file=sys.stderr)
        return 2
    pool = WorkerPool(_pool_config(args))
    app = create_app(pool, token=token, max_timeout_s=args.timeout)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`ScriptedPool`: the real `WorkerPool` (its capacity, eviction, quotas, locks) over stand-in workers that run
code with `exec` in this process, one globals dict each (trusted test code only): no Deno, no Pyodide."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from interpreter_service.api import ExecutionResult
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.process.launch import WorkerConfig

__all__ = ["ExecWorker", "ScriptedPool"]


class ExecWorker:
    """Stands in for a `WorkerProcess`: `execute` runs code in its own globals; what it printed is the logs."""

    def __init__(self, cfg: WorkerConfig) -> None:
        self.cfg = cfg
        self.globals: dict[str, Any] = {}
        self.alive, self.poisoned, self.busy = True, False, False
        self.exit_reason = ""
        self.last_rss = 0
        self.pid = None

    async def execute(self, code: str, *, timeout_s: float) -> ExecutionResult:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(code, self.globals)
        except Exception as e:
            return ExecutionResult(logs=out.getvalue(), error=repr(e), error_kind="exception")
        return ExecutionResult(logs=out.getvalue())

    def interrupt(self) -> None:
        self.alive = False

    async def kill(self) -> None:
        self.alive = False

    def rss_bytes(self) -> int | None:
        return None


class ScriptedPool(WorkerPool):
    """A `WorkerPool` whose workers are `ExecWorker`s (budget counted by caps; no sandbox folder, no watchdog).
    `dist_dir` needs only the two files the distribution check looks for."""

    def __init__(self, tmp: Path, **kwargs: Any) -> None:
        (tmp / "pyodide.mjs").write_text("")
        (tmp / "pyodide-lock.json").write_text("{}")
        kwargs.setdefault("budget_counts", "caps")
        super().__init__(PoolConfig(dist_dir=tmp, **kwargs))

        async def start_worker(cfg: WorkerConfig) -> Any:
            return ExecWorker(cfg)

        self._warm.start_worker = start_worker  # type: ignore[method-assign]

    async def start(self) -> None:
        self._started = True
        self._warm.replenish()
        await self._warm.wait_started(10)

    async def aclose(self) -> None:
        self._closed = True
        self._capacity.close(RuntimeError("closing"))
        self._containers.clear()
        await self._warm.aclose()

"""A worker that fails to start says why (exit code, the end of its stderr, or the start timeout), and the pool
logs it: real processes, a stand-in for the Deno binary (no Pyodide needed, so these run in the fast subset)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from interpreter_service.api import InterpreterError
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerDied, WorkerProcess


def fake_deno(tmp_path: Path, body: str) -> str:
    script = tmp_path / "deno"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def fake_dist(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    dist.mkdir()
    for name in ("pyodide.mjs", "pyodide-lock.json"):
        (dist / name).write_text("{}")
    return dist


async def test_an_exit_before_ready_gives_the_exit_code_and_stderr(tmp_path: Path) -> None:
    deno = fake_deno(tmp_path, 'echo "error: \x1b[31mcannot load the runtime\x1b[0m" >&2\nexit 7')
    w = WorkerProcess(WorkerConfig(dist_dir=tmp_path, deno_bin=deno, start_timeout_s=30))
    async with asyncio.timeout(30):
        with pytest.raises(WorkerDied) as ei:
            await w.start()
    message = str(ei.value)
    assert "exit code 7" in message and "error: cannot load the runtime" in message  # colours stripped
    assert not w.alive


async def test_a_start_timeout_says_so_even_with_nothing_on_stderr(tmp_path: Path) -> None:
    w = WorkerProcess(
        WorkerConfig(dist_dir=tmp_path, deno_bin=fake_deno(tmp_path, "sleep 30"), start_timeout_s=0.5)
    )
    async with asyncio.timeout(30):
        with pytest.raises(
            WorkerDied, match=r"did not become ready within 0.5 s; it wrote nothing to stderr"
        ):
            await w.start()
    assert w.proc is not None and w.proc.returncode is not None  # killed, not left behind


async def test_a_binary_that_cannot_run_is_named(tmp_path: Path) -> None:
    w = WorkerProcess(WorkerConfig(dist_dir=tmp_path, deno_bin=str(tmp_path / "missing-deno")))
    with pytest.raises(WorkerDied, match="could not run .*missing-deno"):
        await w.start()


async def test_the_pool_logs_why_a_worker_did_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    deno = fake_deno(tmp_path, 'echo "boom: the worker cannot start" >&2\nexit 3')
    monkeypatch.setattr("interpreter_service.pool.walls.find_deno", lambda: deno)
    caplog.set_level(logging.ERROR, logger="interpreter_service.pool")
    pool = WorkerPool(
        PoolConfig(workers=1, spares=0, dist_dir=fake_dist(tmp_path), preload=(), start_timeout_s=30)
    )
    async with asyncio.timeout(60):
        with pytest.raises(
            InterpreterError, match="no worker could be started.*boom: the worker cannot start"
        ):
            await pool.start()
    logged = [r.getMessage() for r in caplog.records if "failed to start" in r.getMessage()]
    assert logged and all("exit code 3" in m and "boom: the worker cannot start" in m for m in logged)
    assert pool.stats()["start_failures"] == len(logged)
    assert pool._sandbox is None  # the failed start cleaned up its sandbox folder

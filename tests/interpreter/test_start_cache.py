"""The distribution's start cache: made at setup, read-only, restored by workers (each with its own random
state), and a distribution without one still boots."""

from __future__ import annotations

import asyncio
import shutil
import stat
from pathlib import Path

import pytest

from interpreter_service.launch import WorkerConfig
from interpreter_service.start_cache import START_DIR, prepare_start_cache
from interpreter_service.worker import WorkerProcess

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
RANDOM_CELL = "import random\nprint(random.random())"


async def started(dist: Path, preload: tuple[str, ...] = ()) -> WorkerProcess:
    w = WorkerProcess(WorkerConfig(dist_dir=dist, preload=preload))
    async with asyncio.timeout(120):
        await w.start()
    return w


def test_setup_made_a_read_only_start_cache(dist_dir: Path) -> None:
    start = dist_dir / START_DIR
    names = {f.name for f in start.iterdir()}
    assert {"bare.snapshot", "mpl-fontlist.json", "made-from.sha256"} <= names
    assert all(not f.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) for f in start.iterdir())
    messages: list[str] = []
    prepare_start_cache(dist_dir, log=messages.append)  # unchanged inputs: kept, not remade
    assert any("start cache present" in m for m in messages), messages


def test_the_snapshot_names_no_host_path(dist_dir: Path) -> None:
    """It is made from the project's prepare.mjs and the user's cache: neither path may be in it (a worker's
    code can read its own memory)."""
    data = (dist_dir / START_DIR / "bare.snapshot").read_bytes()
    for path in (ROOT, dist_dir):
        assert str(path).encode() not in data, path


async def test_restored_workers_have_their_own_random_state_and_plot(dist_dir: Path) -> None:
    workers = [await started(dist_dir, ("numpy", "matplotlib")) for _ in range(2)]
    try:
        draws = [(await w.execute(RANDOM_CELL, timeout_s=30)).logs for w in workers]
        plot = await workers[0].execute("import matplotlib.pyplot as plt\nplt.plot([1, 2])", timeout_s=60)
    finally:
        for w in workers:
            await w.kill()
    assert draws[0] != draws[1], draws
    assert plot.ok and len(plot.images) == 1, plot.error
    assert {"load_pyodide", "load_packages", "import_matplotlib"} <= set(workers[0].phases)


async def test_a_distribution_without_a_start_cache_still_boots(dist_dir: Path, tmp_path: Path) -> None:
    dist = tmp_path / "pyodide"
    shutil.copytree(dist_dir, dist, ignore=shutil.ignore_patterns(START_DIR))
    w = await started(dist)
    try:
        r = await w.execute("print(1 + 1)", timeout_s=30)
    finally:
        await w.kill()
    assert r.logs == "2\n", (r.error, r.logs)

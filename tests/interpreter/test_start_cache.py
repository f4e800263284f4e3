"""The distribution's start cache: made at setup, read-only, used by workers that preload matplotlib, and a
distribution without one still boots."""

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

FONTLIST = "/lib/python3.12/site-packages/matplotlib/fontlist.json"
FONTLIST_CELL = f"print(len(open({FONTLIST!r}).read()))"


async def started(dist: Path, preload: tuple[str, ...] = ()) -> WorkerProcess:
    w = WorkerProcess(WorkerConfig(dist_dir=dist, preload=preload))
    async with asyncio.timeout(120):
        await w.start()
    return w


def test_setup_made_a_read_only_start_cache(dist_dir: Path) -> None:
    start = dist_dir / START_DIR
    names = {f.name for f in start.iterdir()}
    assert {"mpl-fontlist.json", "made-from.sha256"} <= names
    assert all(not f.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) for f in start.iterdir())
    messages: list[str] = []
    prepare_start_cache(dist_dir, log=messages.append)  # unchanged inputs: kept, not remade
    assert any("start cache present" in m for m in messages), messages


async def test_a_worker_with_matplotlib_uses_the_font_cache_and_plots(dist_dir: Path) -> None:
    w = await started(dist_dir, ("numpy", "matplotlib"))
    try:
        plot = await w.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2])", timeout_s=60)
        same = await w.execute(FONTLIST_CELL, timeout_s=30)
    finally:
        await w.kill()
    assert plot.ok and len(plot.images) == 1, plot.error
    expected = (dist_dir / START_DIR / "mpl-fontlist.json").read_text()
    assert same.logs == f"{len(expected)}\n", (same.error, same.logs)
    assert {"load_pyodide", "load_packages", "import_matplotlib"} <= set(w.phases)


async def test_a_distribution_without_a_start_cache_still_boots(dist_dir: Path, tmp_path: Path) -> None:
    dist = tmp_path / "pyodide"
    shutil.copytree(dist_dir, dist, ignore=shutil.ignore_patterns(START_DIR))
    w = await started(dist)
    try:
        r = await w.execute("print(1 + 1)", timeout_s=30)
    finally:
        await w.kill()
    assert r.logs == "2\n", (r.error, r.logs)

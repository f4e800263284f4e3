"""A worker gives memory back: the JS garbage a cell leaves is collected once the worker sits idle, and the
buffers it held go back to the system (glibc's mmap threshold is fixed, launch.WORKER_ENV)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerProcess

pytestmark = pytest.mark.sandbox

MIB = 1 << 20
# 48 MiB of JS buffers, their pages really used, that nothing holds once the cell ends
GARBAGE = "import js\nbufs = [js.Uint8Array.new(1 << 20).fill(1) for _ in range(48)]\ndel bufs\nprint('left')"


async def test_garbage_a_cell_leaves_is_given_back_once_the_worker_is_idle(dist_dir: Path) -> None:
    w = WorkerProcess(WorkerConfig(dist_dir=dist_dir, preload=()))
    async with asyncio.timeout(120):
        await w.start()
    try:
        r = await w.execute(GARBAGE, timeout_s=30)
        held = w.rss_bytes()
        lowest = held
        for _ in range(40):  # the collection comes 0.3 s after the call; allow a slow host 4 s
            await asyncio.sleep(0.1)
            lowest = min(lowest, w.rss_bytes())
            if lowest <= held - 32 * MIB:
                break
    finally:
        await w.kill()
    assert r.logs == "left\n", r.error
    assert held - lowest >= 32 * MIB, (
        f"resident {held / MIB:.0f} MiB after the cell, {lowest / MIB:.0f} MiB idle"
    )

"""What the pool's memory budget charges a worker: its caps, or what it uses measured above a floor."""

from __future__ import annotations

import collections
from typing import Literal

from interpreter_service.process.worker import WorkerProcess
from interpreter_service.sizes import parse_size

__all__ = ["BUDGET_COUNTS", "DEFAULT_RESERVE", "READY_SAMPLES", "BudgetCounts", "Charges"]

BudgetCounts = Literal["use", "caps"]
BUDGET_COUNTS: tuple[BudgetCounts, ...] = ("use", "caps")
# The floor before any worker was measured: a warm worker with numpy and matplotlib imported holds about
# 215-290 MiB resident when it becomes ready.
DEFAULT_RESERVE = 320 << 20
READY_SAMPLES = 8  # the automatic floor is the largest RSS of this many workers measured last when ready


class Charges:
    """A worker's charge in the budget, as a scheduler's request against its limit.

    `counts="caps"`: what its caps allow (`WorkerConfig.cost`: WebAssembly heap cap + JS heap cap), whatever
    it uses. `counts="use"` (the default): the larger of its last measured RSS (`WorkerProcess.last_rss`, which
    the watchdog refreshes) and the floor `reserve`, what a new worker is expected to use; a worker being
    started, or one not measured yet, is charged the floor. The floor is `worker_reserve` when given, else
    the largest RSS among the last `READY_SAMPLES` workers measured when they became ready (`note_ready`), or
    `DEFAULT_RESERVE` until one was. The caps themselves are enforced as before either way."""

    def __init__(self, counts: str, cost: int, worker_reserve: str | int | None = None) -> None:
        if counts not in BUDGET_COUNTS:
            raise ValueError(f"budget_counts must be 'use' or 'caps', not {counts!r}")
        if counts == "caps" and worker_reserve is not None:
            raise ValueError("worker_reserve applies when the budget counts use (budget_counts='use')")
        self.counts = counts
        self._cost = cost
        self._fixed = parse_size(worker_reserve) if worker_reserve is not None else None
        if self._fixed is not None and self._fixed <= 0:
            raise ValueError(f"worker_reserve must be positive, not {worker_reserve!r}")
        self._ready: collections.deque[int] = collections.deque(maxlen=READY_SAMPLES)

    @property
    def reserve(self) -> int:
        """The floor: what a worker being started is charged (its caps, when the budget counts caps)."""
        if self.counts == "caps":
            return self._cost
        if self._fixed is not None:
            return self._fixed
        return max(self._ready, default=DEFAULT_RESERVE)

    def note_ready(self, rss: int) -> None:
        """A worker became ready holding `rss` bytes (0: not measured, ignored)."""
        if rss > 0:
            self._ready.append(rss)

    def of(self, worker: WorkerProcess | None, cost: int) -> int:
        """The charge of `worker` (None: one not started yet), whose caps cost `cost` bytes."""
        if self.counts == "caps":
            return cost
        used = worker.last_rss if worker is not None and worker.alive else 0
        return max(used, self.reserve)

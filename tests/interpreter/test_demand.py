"""The pool's growth under load without real workers: the demand estimator (`Demand`), the default growth
sizing from the cores, and `WarmWorkers`' start limit (stand-in workers whose starts the test releases)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interpreter_service.pool.capacity import SPARES_PER_CORE, growth_sizing
from interpreter_service.pool.demand import Demand
from interpreter_service.pool.warm import WarmWorkers
from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerProcess


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def demand(window_s: float = 60.0, start_s: float = 5.0) -> tuple[Demand, Clock]:
    clock = Clock()
    return Demand(window_s=window_s, start_s=start_s, clock=clock), clock


def test_no_takes_no_demand_and_the_floor_holds() -> None:
    d, _ = demand()
    assert d.peak() == 0
    assert d.target(floor=1, ceiling=8) == 1
    assert d.target(floor=3, ceiling=2) == 3  # the configured spares win over a smaller ceiling


def test_a_burst_calls_for_as_many_spares_up_to_the_ceiling() -> None:
    d, _ = demand()
    for _ in range(6):
        d.note_take()
    assert d.peak() == 6
    assert d.target(floor=0, ceiling=8) == 6
    assert d.target(floor=0, ceiling=4) == 4


def test_a_steady_rate_calls_for_rate_times_start_time() -> None:
    d, clock = demand(window_s=60, start_s=5)
    for _ in range(30):  # one take a second for 30 s
        d.note_take()
        clock.now += 1.0
    assert d.peak() == 6  # takes at t, t+1, ..., t+5 all fall within one 5 s start


def test_demand_decays_once_the_window_passes() -> None:
    d, clock = demand(window_s=60)
    for _ in range(5):
        d.note_take()
    clock.now += 30
    d.note_take()
    assert d.peak() == 5
    clock.now += 31  # the burst is older than the window; the lone take is not
    assert d.peak() == 1
    clock.now += 30
    assert d.peak() == 0 and d.target(floor=1, ceiling=8) == 1


def test_the_window_is_at_least_ten_start_times() -> None:
    d, clock = demand(window_s=60, start_s=5)
    d.note_start(20.0)  # a loaded machine: a burst and its refill take minutes
    assert d.window == 200.0
    d.note_take()
    clock.now += 150
    assert d.peak() == 1
    clock.now += 51
    assert d.peak() == 0


def test_start_time_follows_the_starts_seen() -> None:
    d, _ = demand(start_s=6.0)
    d.note_start(2.0)
    assert d.start_s == 2.0  # the first measured start replaces the default
    d.note_start(12.0)
    assert d.start_s == pytest.approx(0.7 * 2.0 + 0.3 * 12.0)
    d.note_start(0.0)  # nonsense is ignored
    assert d.start_s == pytest.approx(5.0)
    with pytest.raises(ValueError):
        Demand(window_s=0)


def test_growth_sizing_from_the_cores() -> None:
    assert growth_sizing(1, None, None, cores=2) == (SPARES_PER_CORE * 2, 2)
    assert growth_sizing(1, None, None, cores=16) == (SPARES_PER_CORE * 16, 16)
    assert growth_sizing(3, 0, 5, cores=2) == (3, 5)  # never under the configured spares
    with pytest.raises(ValueError):
        growth_sizing(1, None, 0, cores=2)


class StubWorker:
    def __init__(self, n: int) -> None:
        self.n = n
        self.alive = True

    async def kill(self) -> None:
        self.alive = False


class GatedWarm(WarmWorkers):
    """Starts finish only when the test releases them; counts the starts in progress at once."""

    def __init__(self, target: int, max_starting: int) -> None:
        self.gates: list[asyncio.Event] = []
        self.running = self.most_running = 0
        self.durations: list[float] = []
        super().__init__(
            WorkerConfig(dist_dir=Path("/nonexistent")),
            target=lambda: target,
            max_starting=max_starting,
            on_started=self.durations.append,
        )
        self.preempt_within_s = 0.0  # a caller's start taking a spare's slot: test_warm_order.py

    async def start_worker(self, cfg: WorkerConfig) -> WorkerProcess:
        n, gate = len(self.gates), asyncio.Event()
        self.gates.append(gate)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await gate.wait()
        finally:
            self.running -= 1
        return StubWorker(n)  # type: ignore[return-value]

    def release_all(self) -> None:
        for g in self.gates:
            g.set()


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_starts_never_exceed_the_limit_and_the_target_is_reached() -> None:
    warm = GatedWarm(target=5, max_starting=2)
    warm.replenish()
    await settle()
    assert len(warm.starting) == 2 and len(warm.gates) == 2
    waiters = [asyncio.create_task(warm.take(30)) for _ in range(3)]  # the waiters add to what is wanted
    await settle()
    assert len(warm.starting) == 2
    while len(warm.idle) < 5 or not all(t.done() for t in waiters):
        warm.release_all()
        await settle()
        assert warm.running <= 2
    assert warm.most_running == 2 and warm.peak_starting == 2
    assert sorted([(await t).n for t in waiters]) == [0, 1, 2]  # type: ignore[attr-defined]
    assert len(warm.idle) == 5 and len(warm.durations) == 8
    await warm.aclose()


async def test_a_finished_start_goes_to_the_longest_waiter_under_the_limit() -> None:
    warm = GatedWarm(target=0, max_starting=1)
    first = asyncio.create_task(warm.take(30))
    await settle()
    second = asyncio.create_task(warm.take(30))
    await settle()
    assert len(warm.gates) == 1  # one start at a time, though two callers wait
    warm.gates[0].set()
    await settle()
    assert first.done() and not second.done() and len(warm.gates) == 2
    warm.gates[1].set()
    await settle()
    assert [(await first).n, (await second).n] == [0, 1]  # type: ignore[attr-defined]
    await warm.aclose()

"""The watchdog's idle verdict from /proc figures (fed here, no Deno needed): CPU with no call in flight kills
a worker after `IDLE_STRIKES` checks (one more when its threads were not read at the check before), V8's own
background threads count only beyond their share of a core, a call in flight resets nothing, and the threads
of a quiet or busy worker are not read."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from interpreter_service.pool import watchdog
from interpreter_service.pool.watchdog import IDLE_STRIKES, V8_HELPERS, Watchdog
from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.procfs import ProcStatus

INTERVAL = 0.25


@dataclass
class FakeWorker:
    pid: int = 4242
    last_rss: int = 0
    busy: bool = False
    alive: bool = True
    cfg: WorkerConfig = field(default_factory=lambda: WorkerConfig(dist_dir=Path("/nonexistent")))
    reasons: list[str] = field(default_factory=list)

    async def kill_for(self, reason: str) -> None:
        self.reasons.append(reason)
        self.alive = False


@dataclass
class Clock:
    """CPU seconds so far of the fake worker: its main thread (and others) and V8's helpers."""

    other: float = 0.0
    helpers: float = 0.0
    thread_reads: int = 0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(
        watchdog, "proc_status", lambda pid: ProcStatus(rss_bytes=1 << 20, tasks=9, cpu_s=c.other + c.helpers)
    )

    def thread_cpu(pid: int) -> dict[str, float]:
        c.thread_reads += 1
        return {"deno": c.other, V8_HELPERS: c.helpers}

    monkeypatch.setattr(watchdog, "thread_cpu", thread_cpu)
    return c


async def run_checks(dog: Watchdog, clock: Clock, n: int, *, other: float, helpers: float) -> None:
    """`n` checks, each after the worker used `other` and `helpers` shares of a core for one interval."""
    for _ in range(n):
        clock.other += other * INTERVAL
        clock.helpers += helpers * INTERVAL
        await dog.check()


async def test_each_round_keeps_the_rss_it_read_and_then_tells_the_pool(clock: Clock) -> None:
    w = FakeWorker()
    rounds: list[int] = []
    dog = Watchdog(lambda: [w], interval_s=INTERVAL, on_checked=lambda: rounds.append(w.last_rss))
    await dog.check()
    await dog.check()
    assert rounds == [1 << 20, 1 << 20]  # what the fake /proc says


async def test_cpu_left_running_with_no_call_is_killed(clock: Clock) -> None:
    w = FakeWorker()
    dog = Watchdog(lambda: [w], interval_s=INTERVAL)
    await dog.check()
    # 0.5 of a core could be V8's at the first check (no figure of its threads before): struck from the second
    await run_checks(dog, clock, IDLE_STRIKES, other=0.5, helpers=0.0)
    assert w.alive
    await run_checks(dog, clock, 1, other=0.5, helpers=0.0)
    assert not w.alive and "no call in flight" in w.reasons[0]


async def test_a_spinning_worker_past_what_v8_could_use_is_struck_at_once(clock: Clock) -> None:
    w = FakeWorker()
    dog = Watchdog(lambda: [w], interval_s=INTERVAL)
    await dog.check()
    await run_checks(dog, clock, IDLE_STRIKES, other=1.5, helpers=0.0)
    assert not w.alive


async def test_v8_helpers_compiling_after_a_call_are_not_killed(clock: Clock) -> None:
    w = FakeWorker()
    dog = Watchdog(lambda: [w], interval_s=INTERVAL)
    await dog.check()
    await run_checks(dog, clock, IDLE_STRIKES * 3, other=0.05, helpers=0.9)
    assert w.alive, w.reasons


async def test_v8_helpers_past_their_share_count(clock: Clock) -> None:
    w = FakeWorker()
    dog = Watchdog(lambda: [w], interval_s=INTERVAL)
    await dog.check()
    await run_checks(dog, clock, IDLE_STRIKES, other=0.0, helpers=1.9)
    assert not w.alive


async def test_a_busy_worker_is_never_idle_killed(clock: Clock) -> None:
    w = FakeWorker(busy=True)
    dog = Watchdog(lambda: [w], interval_s=INTERVAL)
    await dog.check()
    await run_checks(dog, clock, IDLE_STRIKES * 2, other=1.0, helpers=1.0)
    assert w.alive
    w.busy = False
    await run_checks(dog, clock, IDLE_STRIKES, other=1.0, helpers=0.0)
    assert w.alive  # strikes start when the call ends (from the second check: a core could be V8's)
    await run_checks(dog, clock, 1, other=1.0, helpers=0.0)
    assert not w.alive


async def test_threads_are_read_only_for_an_idle_worker_using_cpu(clock: Clock) -> None:
    """A worker under the idle share, or with a call in flight, costs one read of its /proc status."""
    quiet, busy = FakeWorker(pid=1), FakeWorker(pid=2, busy=True)
    dog = Watchdog(lambda: [quiet, busy], interval_s=INTERVAL)
    await dog.check()
    await run_checks(dog, clock, 5, other=0.1, helpers=0.0)  # a tenth of a core: quiet
    assert clock.thread_reads == 0 and quiet.alive and busy.alive
    busy.busy = False
    await run_checks(dog, clock, 1, other=0.1, helpers=0.5)  # both over the share: their threads are read
    assert clock.thread_reads == 2


def test_thread_cpu_reads_this_process_threads_by_name() -> None:
    """The real /proc: threads named as /comm has them, CPU seconds summed per name; nothing for no process."""
    from interpreter_service.process.procfs import thread_cpu

    spent = thread_cpu(os.getpid())
    name = Path("/proc/self/comm").read_text().strip()
    assert name in spent and spent[name] >= 0.0, spent
    assert thread_cpu(None) == {}

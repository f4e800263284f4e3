"""`WarmWorkers.take` serves callers first come, first served: a worker that finishes starting goes to the
longest waiting caller, never to a newcomer (stand-in workers whose starts the test releases one by one)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from interpreter_service.pool.warm import WarmWorkers
from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerDied, WorkerProcess


class StubWorker:
    def __init__(self, n: int) -> None:
        self.n = n
        self.alive = True

    async def kill(self) -> None:
        self.alive = False


class GatedWarm(WarmWorkers):
    """Starts finish only when the test releases them (`release(i)`: the i-th start, from 0)."""

    def __init__(self) -> None:
        super().__init__(WorkerConfig(dist_dir=Path("/nonexistent")), target=lambda: 0)
        self.gates: list[asyncio.Event] = []

    async def start_worker(self, cfg: WorkerConfig) -> WorkerProcess:
        n = len(self.gates)
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return StubWorker(n)  # type: ignore[return-value]

    async def release(self, i: int) -> None:
        self.gates[i].set()
        await settle()


async def settle() -> None:
    """Let every ready task run (starts, hand-overs, wake-ups)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_started_worker_goes_to_the_longest_waiting_caller() -> None:
    warm = GatedWarm()
    first = asyncio.create_task(warm.take(30))
    await settle()
    second = asyncio.create_task(warm.take(30))
    await settle()
    assert warm.waiting == 2 and len(warm.gates) == 2  # one start per waiting caller
    assert warm.taking == warm.awaiting_starts == 2
    await warm.release(1)  # the later start finishes first: it still goes to the first caller
    assert first.done() and not second.done()
    newcomer = asyncio.create_task(warm.take(30))  # arrives while the second caller waits
    await settle()
    await warm.release(0)
    assert second.done() and not newcomer.done()  # the newcomer does not jump the queue
    assert [(await first).n, (await second).n] == [1, 0]  # type: ignore[attr-defined]
    await warm.release(2)
    assert (await newcomer).n == 2  # type: ignore[attr-defined]
    assert warm.waiting == 0 and warm.idle == []
    assert warm.taking == warm.awaiting_starts == 0
    await warm.aclose()


async def test_a_caller_that_gives_up_leaves_the_line() -> None:
    warm = GatedWarm()
    with pytest.raises(TimeoutError):
        await warm.take(0.05)
    assert warm.waiting == 0
    later = asyncio.create_task(warm.take(30))
    await settle()
    await warm.release(0)  # the start begun for the caller that left serves the next one
    assert later.done() and (await later).n == 0  # type: ignore[attr-defined]
    await warm.aclose()


async def test_a_worker_handed_to_a_cancelled_caller_passes_to_the_next() -> None:
    warm = GatedWarm()
    first = asyncio.create_task(warm.take(30))
    await settle()
    second = asyncio.create_task(warm.take(30))
    await settle()
    warm.gates[0].set()
    await asyncio.sleep(0)  # the start ends and hands its worker to the first caller ...
    await asyncio.sleep(0)
    first.cancel()  # ... which is cancelled before it wakes
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.sleep(0)
    assert second.done() and (await second).n == 0  # type: ignore[attr-defined]
    await warm.aclose()


class KindWarm(GatedWarm):
    """A pool's warm workers preloading numpy, with a spare target and one start at a time; records what each
    start ran (its preload) and which starts were stopped."""

    def __init__(self, spares: int) -> None:
        super().__init__()
        self.cfg = WorkerConfig(dist_dir=Path("/nonexistent"), preload=("numpy",))
        self._target = lambda: spares
        self.max_starting = 1
        self.preloads: list[tuple[str, ...]] = []
        self.stopped: list[int] = []

    async def start_worker(self, cfg: WorkerConfig) -> WorkerProcess:
        n = len(self.preloads)
        self.preloads.append(tuple(cfg.preload))
        try:
            return await super().start_worker(cfg)
        except asyncio.CancelledError:
            self.stopped.append(n)
            raise


async def test_a_young_spare_start_gives_its_slot_to_a_caller_s_lean_start() -> None:
    warm = KindWarm(spares=1)
    warm.replenish()  # the spare: a full start
    await settle()
    caller = asyncio.create_task(warm.take(30))  # arrives at once, the only slot taken by the spare
    await settle()
    assert warm.preloads == [("numpy",), ()] and warm.stopped == [0]
    await warm.release(1)
    assert (await caller).n == 1  # type: ignore[attr-defined]
    assert warm.preloads == [("numpy",), (), ("numpy",)]  # nobody waits: the spare is started again
    assert warm.peak_starting == 1
    await warm.aclose()


async def test_an_older_spare_start_is_kept_for_the_caller() -> None:
    warm = KindWarm(spares=1)
    warm.preempt_within_s = 0.0  # every start under way counts as too far along to stop
    warm.replenish()
    await settle()
    caller = asyncio.create_task(warm.take(30))
    await settle()
    assert warm.preloads == [("numpy",)] and warm.stopped == []  # the caller waits for the spare's start
    await warm.release(0)
    assert (await caller).n == 0  # type: ignore[attr-defined]
    await warm.aclose()


def other_cap(warm: WarmWorkers) -> WorkerConfig:
    """What the pool starts for a container with its own memory cap: the lean configuration, another cap."""
    return dataclasses.replace(warm.lean_cfg, memory_limit=warm.cfg.memory_limit * 2)


async def test_a_dedicated_start_waits_for_a_start_slot() -> None:
    """A container with its own memory cap starts its worker within the same start limit: behind a spare's
    start too far along to stop, not beside it."""
    warm = KindWarm(spares=1)
    warm.preempt_within_s = 0.0
    warm.replenish()
    await settle()
    dedicated = asyncio.create_task(warm.start_dedicated(other_cap(warm)))
    await settle()
    assert warm.preloads == [("numpy",)]  # waits for the one slot
    assert warm.awaiting_starts == 1 and warm.taking == 0  # its caller waits, not in `take`
    await warm.release(0)
    assert warm.preloads == [("numpy",), ()] and warm.idle_count == 1  # the spare is kept, not restarted
    assert warm.awaiting_starts == 1  # now for its own start
    await warm.release(1)
    assert (await dedicated).n == 1  # type: ignore[attr-defined]
    assert warm.awaiting_starts == 0
    assert warm.peak_starting == 1
    await warm.aclose()


async def test_a_young_spare_start_gives_its_slot_to_a_dedicated_start() -> None:
    warm = KindWarm(spares=1)
    warm.replenish()
    await settle()
    dedicated = asyncio.create_task(warm.start_dedicated(other_cap(warm)))
    await settle()
    assert warm.preloads == [("numpy",), ()] and warm.stopped == [0]
    await warm.release(1)
    assert (await dedicated).n == 1  # type: ignore[attr-defined]
    await settle()
    assert warm.preloads == [("numpy",), (), ("numpy",)]  # the spare is started again
    assert warm.peak_starting == 1
    await warm.aclose()


async def test_dedicated_starts_wait_first_come_first_served() -> None:
    """Waiting dedicated starts get slots in order; one whose caller gave up leaves the line, and the
    closing pool refuses those still waiting."""
    warm = KindWarm(spares=1)
    warm.preempt_within_s = 0.0
    warm.replenish()
    await settle()
    first, second, third = (asyncio.create_task(warm.start_dedicated(other_cap(warm))) for _ in range(3))
    await settle()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await warm.release(0)  # the spare's slot goes to the second: the first left
    assert len(warm.gates) == 2 and not third.done()
    await warm.release(1)
    assert (await second).n == 1 and len(warm.gates) == 3  # type: ignore[attr-defined]
    fourth = asyncio.create_task(warm.start_dedicated(other_cap(warm)))
    await settle()
    await warm.aclose()
    with pytest.raises(WorkerDied, match="closing"):
        await fourth
    await warm.release(2)  # one under way is its caller's to finish
    assert (await third).n == 2  # type: ignore[attr-defined]

"""What the memory budget charges a worker (`charges.py`) and the pool's accounting of it, with fake RSS figures
(no Deno): admission by charges, waiting when workers grew, waking when a charge drops, the caps mode, the
floor learnt from workers measured when ready."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from interpreter_service.api import PoolExhausted
from interpreter_service.pool import PoolConfig, WorkerPool
from interpreter_service.pool.capacity import pool_sizing
from interpreter_service.pool.charges import DEFAULT_RESERVE, READY_SAMPLES, Charges
from interpreter_service.process.launch import WorkerConfig

M, G = 1 << 20, 1 << 30
CAPS = 1536 * M  # a default worker's caps: 1 GiB WebAssembly heap + 512 MiB JS heap


@dataclass
class FakeWorker:
    """A worker as the pool sees it, its RSS as the watchdog last read it."""

    last_rss: int
    alive: bool = True
    poisoned: bool = False
    cfg: WorkerConfig = field(default_factory=lambda: WorkerConfig(dist_dir=Path("/nonexistent")))

    def interrupt(self) -> None:
        pass

    async def kill(self) -> None:
        self.alive = False


def test_a_worker_is_charged_its_use_above_the_floor_or_its_caps() -> None:
    use = Charges("use", CAPS)
    assert use.reserve == DEFAULT_RESERVE == 320 * M  # nothing measured yet
    assert use.of(None, CAPS) == 320 * M  # a worker being started
    assert use.of(FakeWorker(250 * M), CAPS) == 320 * M  # below the floor
    assert use.of(FakeWorker(700 * M), CAPS) == 700 * M  # grew past it
    assert use.of(FakeWorker(700 * M, alive=False), CAPS) == 320 * M  # dead: nothing held but the floor
    assert Charges("use", CAPS, "256m").of(FakeWorker(200 * M), CAPS) == 256 * M
    caps = Charges("caps", CAPS)
    assert caps.reserve == CAPS and caps.of(FakeWorker(700 * M), 4 * G) == 4 * G
    with pytest.raises(ValueError, match="'use' or 'caps'"):
        Charges("rss", CAPS)
    with pytest.raises(ValueError, match="applies when the budget counts use"):
        Charges("caps", CAPS, "300m")


def test_the_automatic_floor_is_the_largest_rss_of_recently_ready_workers() -> None:
    charges = Charges("use", CAPS)
    charges.note_ready(0)  # not measured: ignored
    assert charges.reserve == DEFAULT_RESERVE
    for rss in (250 * M, 290 * M, 270 * M):
        charges.note_ready(rss)
    assert charges.reserve == 290 * M  # below the default once measured, too
    for _ in range(READY_SAMPLES):
        charges.note_ready(260 * M)
    assert charges.reserve == 260 * M  # the 290 MiB one is no longer recent
    assert Charges("use", CAPS, "400m").reserve == 400 * M  # a configured floor stays


def test_sizing_follows_the_floor_and_one_workers_caps_must_fit() -> None:
    assert pool_sizing(2, 1, None, "12g", CAPS, 320 * M) == (12 * G, 38)  # 8 when it counted caps
    assert pool_sizing(2, 1, None, "12g", CAPS) == (12 * G, 8)
    assert pool_sizing(2, 1, 5, "12g", CAPS, 320 * M) == (12 * G, 5)  # an explicit most stays
    with pytest.raises(ValueError, match="smaller than one worker's caps"):
        pool_sizing(1, 0, None, "1g", CAPS, 320 * M)
    with pytest.raises(ValueError, match=r"too small for 3 warm workers of 640m each \(their expected use\)"):
        pool_sizing(2, 1, None, "1600m", CAPS, 640 * M)


def fake_pool(dist_dir: Path, rss: list[int], **overrides: object) -> WorkerPool:
    """A pool that hands out fake workers, the next one holding `rss.pop(0)`, and starts no warm ones."""
    fields: dict[str, object] = {
        "workers": 1,
        "spares": 0,
        "dist_dir": dist_dir,
        "memory_budget": "2g",
        "queue_timeout_s": 0.2,
        **overrides,
    }
    pool = WorkerPool(PoolConfig(**fields))  # type: ignore[arg-type]

    async def take(tier: int) -> FakeWorker:
        return FakeWorker(rss.pop(0))

    pool._binder.take = take  # type: ignore[assignment,method-assign]
    pool._replenish = lambda: None  # type: ignore[method-assign]
    pool._started = True
    return pool


async def test_the_pool_admits_by_charges_waits_when_grown_and_wakes_when_one_drops(dist_dir: Path) -> None:
    """Budget 2 GiB, caps 1.5 GiB a worker, floor 300 MiB: room for six containers (at their caps: one). Once
    one grew (the watchdog's round), the sixth waits, nothing running is stopped; when the grown one is killed
    its charge drops to the floor and the waiter gets in; an idle one that grew is evicted for a newcomer."""
    pool = fake_pool(dist_dir, [250 * M] * 8, worker_reserve="300m", max_workers=None)
    assert pool.max_containers == 6 and pool.budget_counts == "use"
    ids = [(await pool.create_container()).id for _ in range(5)]
    for cid in ids:
        pool.pin(cid)  # in use: not evictable
    assert pool._capacity.live_bytes == 1500 * M  # each charged the floor (its RSS is under it)
    grown = pool._containers[ids[0]].worker
    assert grown is not None
    grown.last_rss = 700 * M
    pool._recharge()
    stats = pool.stats()
    assert stats["memory_reserved_bytes"] == 1900 * M and stats["memory_used_bytes"] == 1700 * M
    assert stats["worker_reserve_bytes"] == 300 * M and stats["containers_live"] == 5
    with pytest.raises(PoolExhausted, match="all 5 in use, 1900m of the 2g memory budget"):
        await pool.create_container()
    pool.queue_timeout_s = 30
    waiter = asyncio.create_task(pool.create_container())
    await asyncio.sleep(0.05)
    assert pool.stats()["waiters"] == 1 and grown.alive
    grown.alive = False  # killed (e.g. by the watchdog, past its limit): charged the floor again
    pool._recharge()
    sixth = await asyncio.wait_for(waiter, 1)
    assert pool.stats()["containers_live"] == 6 and pool._capacity.live_bytes == 1800 * M
    pool.unpin(ids[1])  # idle now, and it grew: evicted (used longest ago) for the next one
    pool._containers[ids[1]].worker.last_rss = 500 * M  # type: ignore[union-attr]
    pool._recharge()
    seventh = await pool.create_container()
    assert set(pool._containers) == {*ids[:1], *ids[2:], sixth.id, seventh.id}
    assert pool._capacity.live_bytes == 1800 * M
    await pool.delete_container(seventh.id)
    assert pool._capacity.live_bytes == 1500 * M and pool._capacity.live == 5


async def test_the_caps_mode_charges_caps_whatever_workers_use(dist_dir: Path) -> None:
    pool = fake_pool(dist_dir, [250 * M] * 2, budget_counts="caps", max_workers=None)
    assert pool.max_containers == 1 and pool.stats()["worker_reserve_bytes"] == CAPS
    first = await pool.create_container()
    pool.pin(first.id)
    pool._recharge()
    assert pool._capacity.live_bytes == CAPS
    with pytest.raises(PoolExhausted, match="1536m of the 2g memory budget"):
        await pool.create_container()


async def test_spares_and_the_floor_follow_the_workers_measured_when_ready(dist_dir: Path) -> None:
    pool = fake_pool(dist_dir, [], max_workers=20, max_spares=8)
    for _ in range(8):
        pool.demand.note_take()
    assert pool.stats()["worker_reserve_bytes"] == 320 * M and pool._target_idle() == 6  # 2 GiB / 320 MiB
    on_ready = pool._warm._on_ready
    assert on_ready is not None
    for rss in (200 * M, 256 * M):
        on_ready(FakeWorker(rss))  # type: ignore[arg-type]
    assert pool.stats()["worker_reserve_bytes"] == 256 * M and pool._target_idle() == 8
    pool._capacity.live, pool._capacity.live_bytes = 3, 1536 * M
    assert pool._target_idle() == 2  # what the charges leave: 512 MiB


def test_the_service_flags_choose_what_the_budget_counts() -> None:
    from interpreter_service.__main__ import _parser

    args = _parser().parse_args(["serve", "--budget-counts", "caps", "--worker-reserve", "300m"])
    assert (args.budget_counts, args.worker_reserve) == ("caps", "300m")
    args = _parser().parse_args(["serve"])
    assert (args.budget_counts, args.worker_reserve) == ("use", None)

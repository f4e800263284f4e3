"""`WorkerPool`: pre-warmed Deno/Pyodide workers handed out one per container, replaced on crash or recycle."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable

from interpreter_service.api import (
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    OwnerQuota,
    PoolStats,
)
from interpreter_service.pool.binder import Binder
from interpreter_service.pool.capacity import NO_QUOTA, Capacity, growth_sizing, pool_sizing
from interpreter_service.pool.charges import Charges
from interpreter_service.pool.config import PoolConfig
from interpreter_service.pool.containers import Container, ContainerTable
from interpreter_service.pool.demand import Demand
from interpreter_service.pool.files import ContainerFiles, FileRequest
from interpreter_service.pool.housekeeping import Housekeeper
from interpreter_service.pool.walls import describe, lower_walls, raise_walls, worker_config
from interpreter_service.pool.warm import WarmWorkers
from interpreter_service.pool.watchdog import Watchdog
from interpreter_service.process.launch import WorkerConfig, heaps_cost
from interpreter_service.process.sandbox_dir import SandboxDir
from interpreter_service.process.worker import WorkerDied, WorkerProcess
from interpreter_service.sizes import memory_tier

__all__ = ["ExecutionHook", "WorkerPool"]

log = logging.getLogger("interpreter_service.pool")
# Called after every `execute` with its duration in seconds and its outcome: "ok" or the result's
# `error_kind` ("exception", "timeout", "memory", "crashed", "cancelled").
ExecutionHook = Callable[[float, str], None]
# Said at the head of the first result after a container's worker died between calls (so its state is gone).
LOST_STATE_NOTE = (
    "[the container's earlier state was lost: its worker stopped between calls ({reason}); "
    "this code ran in a fresh interpreter, without the earlier variables and files]\n"
)
_RESTART_CAUSE = {"timeout": "timeout", "memory": "memory", "cancelled": "cancelled"}


class WorkerPool(Interpreter):
    """Containers, each owning one Deno/Pyodide worker, built from a `PoolConfig` (its fields say what each
    setting does). `workers + spares` warm processes are kept ready, and more spares while demand is high: as
    many as the recent peak of takes within one start time, up to `max_spares`. A start that callers wait for
    imports nothing ahead (their code imports what it uses) unless `preload_on_demand`; warm workers started
    ahead of need import `preload`.

    At most `max_workers` containers live at once, and what their workers are charged (plus the warm spares')
    stays within `memory_budget` (see `charges.Charges`). A `create_container` past either waits its turn
    (FIFO) up to `queue_timeout_s`, evicting idle unpinned containers of its own owner (least recently used
    first; never another owner's) when `evict_idle`; an owner's `OwnerQuota` bounds its own containers.
    Workers run as `user` from a neutral sandbox folder (`sandbox_dir`). `on_execution(seconds, outcome)`,
    when set, is called after every `execute`.

    The pool owns its parts: the warm set (`WarmWorkers`), the container table (`ContainerTable`) and their
    files (`ContainerFiles`), the housekeeper (`Housekeeper`: expiry, eviction), admission (`Capacity`), the
    charges, the demand and the watchdog; it binds workers to containers and runs the calls.
    """

    def __init__(self, config: PoolConfig | None = None) -> None:
        self.config = config = config or PoolConfig()
        if config.workers < 1 or config.spares < 0:
            raise ValueError("workers must be >= 1 and spares >= 0")
        self.timeout_s = config.timeout_s
        self.queue_timeout_s = config.queue_timeout_s
        self.memory_limit = str(config.memory_limit)
        tier = memory_tier(config.memory_limit)
        self._default_cost = cost = heaps_cost(tier, config.js_heap_mb)
        self._charges = Charges(config.budget_counts, cost, config.worker_reserve)
        self.budget, self.max_containers = pool_sizing(
            config.workers,
            config.spares,
            config.max_workers,
            config.memory_budget,
            cost,
            self._charges.reserve,
        )
        self.max_spares, self.max_starting = growth_sizing(
            config.spares, config.max_spares, config.max_starting
        )
        self.demand = Demand(window_s=config.demand_window_s)
        self.on_execution: ExecutionHook | None = None
        self._warm = WarmWorkers(
            worker_config(config, tier),
            self._target_idle,
            max_starting=self.max_starting,
            on_started=self.demand.note_start,
            on_ready=lambda w: self._charges.note_ready(w.last_rss),
            preload_on_demand=config.preload_on_demand,
        )
        self._containers = ContainerTable()
        self._files = ContainerFiles(self._containers, self._file_requests)
        self._housekeeper = Housekeeper(
            self._containers,
            idle_expiry_s=config.idle_expiry_s,
            evict_idle=config.evict_idle,
            interval_s=config.reap_interval_s or max(0.5, min(60.0, config.idle_expiry_s / 4)),
            remove=self._remove,
            freed=self._room_freed,
            tick=self._replenish,
        )
        self._binder = Binder(
            self._warm, self.demand, self._containers, room=self._room_freed, replenish=self._replenish
        )
        self._capacity = Capacity(
            max_live=self.max_containers,
            budget=self.budget,
            evictable=self._housekeeper.evictable,
            evict=self._housekeeper.evict_one,
        )
        self._reaper: asyncio.Task[None] | None = None
        self._sandbox: SandboxDir | None = None
        self._started = self._closed = False
        self._watchdog = Watchdog(self._workers, on_checked=self._recharge)
        self._watching: asyncio.Task[None] | None = None

    @property
    def cfg(self) -> WorkerConfig:
        return self._warm.cfg

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            self._sandbox, cfg = await raise_walls(self._warm.cfg, self.config.isolation)
            self._warm.cfg = cfg
            log.info("sandbox isolation: %s", self.isolation)
            self._warm.replenish()
            self._reaper = asyncio.create_task(self._housekeeper.run(), name="pool-reaper")
            self._watching = asyncio.create_task(self._watchdog.run(), name="pool-watchdog")
            await self._warm.wait_started(cfg.start_timeout_s + 30)
            if not self._warm.idle:
                raise InterpreterError(f"no worker could be started: {self.start_errors[-1:]}")
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        self._closed = True
        self._capacity.close(InterpreterError("the code-interpreter pool is shutting down"))
        tasks = [t for t in (self._reaper, self._watching, *self._binder.pending) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        workers = self._containers.workers()
        self._containers.clear()
        await asyncio.gather(self._warm.aclose(), *(w.kill() for w in workers), return_exceptions=True)
        await lower_walls(self.cfg, self._sandbox)
        self._sandbox = None

    @property
    def isolation(self) -> str:
        """The walls around each worker, in words (logged at start)."""
        return describe(self.cfg)

    def _workers(self) -> list[WorkerProcess]:
        """Every started worker: warm ones and those of containers."""
        return [*self._warm.idle, *self._containers.workers()]

    @property
    def start_errors(self) -> list[str]:
        """The reasons of the last workers that failed to start (each is logged too)."""
        return self._warm.start_errors

    def spare_target(self) -> int:
        """Spare workers wanted now: `spares`, or the recent peak demand up to `max_spares`."""
        return self.demand.target(self.config.spares, self.max_spares)

    def _target_idle(self) -> int:
        """Warm workers to keep: the warm set less the live containers, at least the spare target while the
        pool may still grow, and only as many as the containers' charges leave room for in the memory budget,
        at the worker reserve each; plus one for each admitted container about to take one."""
        live = self._capacity.live
        spares = self.spare_target()
        want = max(self.config.workers + self.config.spares - live, min(spares, self.max_containers - live))
        room = (self.budget - self._capacity.live_bytes) // self._charges.reserve
        return max(0, min(want, room)) + self._about_to_take()

    def _about_to_take(self) -> int:
        """Live containers of the pool's heap without a worker (none yet, or none since theirs died) that
        are not in `take` already (its waiters count there): each will take an idle worker, and its charge is
        in the budget already. Counted as served, a burst admitted at once (workers bound in the background)
        made the pool kill the warm workers its own containers were about to take, and each then waited for
        a start."""
        return max(0, self._containers.unbound(self._warm.cfg.memory_limit) - self._warm.taking)

    @property
    def budget_counts(self) -> str:
        """What the budget counts of each worker: "use" (its measured RSS, at least the reserve) or "caps"."""
        return self._charges.counts

    def _recharge(self) -> None:
        """Charge each container what its worker uses now (after each watchdog round, which measured them);
        when the charges dropped, waiters may get in."""
        delta = 0
        for c in self._containers.values():
            charge = self._charges.of(c.worker, c.cost)
            delta, c.charge = delta + charge - c.charge, charge
        if delta:
            self._capacity.adjust(delta)

    def _replenish(self) -> None:
        if not self._closed:
            self._warm.replenish()

    def _room_freed(self) -> None:
        """Containers went: the admission queue may go on, and the warm workers are topped up."""
        self._capacity.wake()
        self._replenish()

    # -- containers --------------------------------------------------------------------------------
    def _info(self, c: Container) -> ContainerInfo:
        return ContainerInfo(
            id=c.id,
            created_at=c.created_at,
            last_active_at=c.last_active_at,
            expires_after_s=self._housekeeper.expiry_of(c),
            name=c.name,
            memory_limit=c.memory_limit or self.memory_limit,
            owner=c.owner,
        )

    def check_memory_limit(self, memory_limit: str | None) -> None:
        if memory_limit is not None:
            cost = heaps_cost(memory_tier(memory_limit), self.config.js_heap_mb)
            self._capacity.check(cost, f"memory_limit {memory_limit!r}")

    async def create_container(
        self,
        *,
        name: str | None = None,
        memory_limit: str | None = None,
        expires_after_s: float | None = None,
        owner: str | None = None,
        quota: OwnerQuota | None = None,
        wait_for_worker: bool = True,
    ) -> ContainerInfo:
        if not self._started or self._closed:
            raise InterpreterError("the pool is not running")
        tier = memory_tier(memory_limit) if memory_limit is not None else self.cfg.memory_limit
        cost = heaps_cost(tier, self.config.js_heap_mb)
        charge = self._charges.of(None, cost)
        await self._capacity.acquire(
            cost,
            self.queue_timeout_s,
            f"memory_limit {memory_limit or self.memory_limit!r}",
            charge=charge,
            owner=owner,
            size=tier,
            quota=quota or NO_QUOTA,
        )
        now = time.time()
        c = Container(
            id="cntr_" + secrets.token_hex(12),
            created_at=now,
            last_active_at=now,
            name=name,
            memory_limit=memory_limit,
            cost=cost,
            charge=charge,
            tier=tier,
            worker=None,
            expires_after_s=expires_after_s,
            owner=owner,
        )
        self._containers.add(c)  # the lock keeps the reaper and evictions off while it gets a worker
        if not wait_for_worker:
            self._binder.bind_later(c)
            return self._info(c)
        async with c.lock:
            try:
                c.worker = await self._binder.take(tier)
            except BaseException:
                if self._containers.pop(c.id) is not None:
                    self._capacity.release(c.charge, c.owner, c.tier)
                self._room_freed()
                raise
            c.last_active_at = time.time()
        self._replenish()
        return self._info(c)

    def expire_idle(self) -> list[str]:
        """Delete the containers idle past their expiry now (the housekeeper does so on a timer); their ids."""
        return self._housekeeper.expire_idle()

    async def get_container(self, container_id: str) -> ContainerInfo:
        return self._info(self._containers.live(container_id))

    async def list_containers(self) -> list[ContainerInfo]:
        return [self._info(c) for c in self._containers.values()]

    def _remove(self, c: Container) -> None:
        """Forget a container, kill its worker and give its room back (the caller wakes the queue)."""
        if self._containers.pop(c.id) is None:
            return
        if c.worker:
            c.worker.interrupt()
        self._warm.discard(c.worker)
        c.worker = None
        self._capacity.release(c.charge, c.owner, c.tier)

    async def delete_container(self, container_id: str) -> None:
        self._remove(self._containers.live(container_id))
        self._room_freed()

    def pin(self, container_id: str) -> None:
        c = self._containers.get(container_id)
        if c is not None:
            c.pins += 1

    def unpin(self, container_id: str) -> None:
        c = self._containers.get(container_id)
        if c is not None and c.pins > 0:
            c.pins -= 1
            if c.pins == 0:
                self._capacity.wake()

    def _observe(self, seconds: float, outcome: str) -> None:
        if self.on_execution is not None:
            try:
                self.on_execution(seconds, outcome)
            except Exception:
                log.exception("the on_execution hook failed")

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        c = self._containers.live(container_id)
        try:
            async with c.lock:
                if container_id not in self._containers:
                    raise ContainerNotFound(container_id)
                return await self._execute_locked(c, code, timeout_s or self.timeout_s)
        finally:
            self._capacity.wake()  # idle now: evictable for a waiter, unless pinned

    async def _execute_locked(self, c: Container, code: str, timeout_s: float) -> ExecutionResult:
        c.last_active_at = time.time()
        t0 = time.monotonic()
        cause, outcome = "cancelled", "cancelled"
        try:
            try:
                await self._binder.ensure(c)
            except InterpreterError as e:  # WorkerDied included: no worker could be had
                cause, outcome = "crash", "crashed"
                return ExecutionResult(
                    logs="", error=f"no worker available: {e}", error_kind="crashed", worker_restarted=True
                )
            report, c.lost_state = c.lost_state, False  # a loss no result has reported yet
            assert c.worker is not None
            result = await c.worker.execute(code, timeout_s=timeout_s)
            cause = _RESTART_CAUSE.get(result.error_kind or "", "crash")
            outcome = result.error_kind or "ok"
        finally:
            c.last_active_at = time.time()
            self._binder.after_call(c, cause)
            self._observe(time.monotonic() - t0, outcome)
        if result.worker_restarted:
            c.lost_state = False  # this result tells the caller
        elif report:
            note = LOST_STATE_NOTE.format(reason=c.lost_reason or "it stopped")
            result = dataclasses.replace(result, logs=note + result.logs, worker_restarted=True)
        return result

    # -- files -------------------------------------------------------------------------------------
    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        return await self._files.write_file(container_id, path, data)

    async def read_file(self, container_id: str, path: str) -> bytes:
        return await self._files.read_file(container_id, path)

    async def delete_file(self, container_id: str, path: str) -> None:
        await self._files.delete_file(container_id, path)

    async def list_files(self, container_id: str) -> list[FileInfo]:
        return await self._files.list_files(container_id)

    @contextlib.asynccontextmanager
    async def _file_requests(self, c: Container) -> AsyncIterator[FileRequest]:
        try:
            async with c.lock:
                c.last_active_at = time.time()
                try:
                    await self._binder.ensure(c)
                    assert c.worker is not None
                    yield functools.partial(c.worker.request, timeout_s=30.0)
                except WorkerDied as e:
                    raise InterpreterError(f"the container's worker died: {e}") from e
                finally:
                    c.last_active_at = time.time()
                    self._binder.after_call(c, "crash")
        finally:
            self._capacity.wake()

    @property
    def closed(self) -> bool:
        """Whether `aclose` ran (the pool hands out nothing more)."""
        return self._closed

    async def wait_warm(self, timeout_s: float | None = None) -> None:
        """Wait until no worker is starting (the warm pool is at its target size)."""
        await self._warm.wait_started(timeout_s or self.cfg.start_timeout_s + 10)

    def stats(self) -> PoolStats:
        idle = [w for w in self._warm.idle if w.alive]
        starting = len(self._warm.starting)
        spares = sum(self._charges.of(w, w.cfg.cost) for w in idle)
        spares += starting * self._charges.of(None, self._default_cost)
        return PoolStats(
            containers_live=len(self._containers),
            containers_busy=self._containers.busy(),
            workers_idle=len(idle),
            workers_starting=starting,
            waiters=self._capacity.waiting,
            worker_waiters=self._warm.awaiting_starts,
            workers_started=self._warm.started,
            max_containers=self.max_containers,
            memory_budget_bytes=self.budget,
            memory_reserved_bytes=self._capacity.live_bytes + spares,
            memory_used_bytes=sum(w.last_rss for w in self._workers() if w.alive),
            worker_reserve_bytes=self._charges.reserve,
            restarts=dict(self._binder.restarts),
            start_failures=self._warm.start_failures,
            isolation=self.cfg.confiner.name,
            watchdog_kills=self._watchdog.kills,
            spare_target=self.spare_target(),
            demand_peak=self.demand.peak(),
            start_limit=self.max_starting,
        )

    def worker_rss_bytes(self) -> list[int]:
        """Resident memory of every worker process (warm and in containers), read from /proc."""
        return [rss for w in self._workers() if (rss := w.rss_bytes()) is not None]

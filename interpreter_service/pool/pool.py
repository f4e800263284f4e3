"""`WorkerPool`: pre-warmed Deno/Pyodide workers handed out one per container, replaced on crash or recycle."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from interpreter_service.api import (
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    Interpreter,
    InterpreterError,
    OwnerQuota,
    PoolStats,
)
from interpreter_service.dist.distribution import checked_dist_dir
from interpreter_service.pool.capacity import NO_QUOTA, Capacity, growth_sizing, pool_sizing
from interpreter_service.pool.charges import Charges
from interpreter_service.pool.containers import Container, ContainerFiles, FileRequest
from interpreter_service.pool.demand import Demand
from interpreter_service.pool.housekeeping import IdleContainers
from interpreter_service.pool.warm import WarmWorkers
from interpreter_service.pool.watchdog import Watchdog
from interpreter_service.process.confine import detect
from interpreter_service.process.launch import (
    DEFAULT_PRELOAD,
    WORKER_SCRIPT,
    WorkerConfig,
    find_deno,
    heaps_cost,
)
from interpreter_service.process.sandbox_dir import (
    SandboxDir,
    prepare_sandbox_dir,
    remove_sandbox_dir,
    resolve_user,
)
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


class WorkerPool(ContainerFiles, IdleContainers, Interpreter):
    """Containers, each owning one Deno/Pyodide worker; `workers + spares` warm processes kept ready, and
    more spares while demand is high: as many as the recent peak of takes within one start time (over the
    last `demand_window_s`), up to `max_spares` (default: 4 per core). At most `max_starting` workers start
    at once (default: one per core). A start that callers wait for imports nothing ahead (their code imports
    what it uses) unless `preload_on_demand`; warm workers started ahead of need import `preload`.

    At most `max_workers` containers live at once (default: as many as the budget holds at the worker
    reserve), and what their workers are charged (plus the warm spares') stays within `memory_budget`: with
    `budget_counts="use"` the larger of a worker's measured RSS and `worker_reserve` (default: the largest
    RSS of recently ready workers), with `"caps"` its heaps' caps (see `charges.Charges`). A
    `create_container` past either waits its turn (FIFO) up to `queue_timeout_s`, evicting idle unpinned
    containers of its own owner (least recently used first; never another owner's) when `evict_idle`; an
    owner's `OwnerQuota` bounds its own containers.
    Workers run as `user` (default: "nobody" when this process is root; "" keeps our own user) from a
    neutral sandbox folder (`sandbox_dir`). `on_execution(seconds, outcome)`, when set, is called after
    every `execute`.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        spares: int = 1,
        max_workers: int | None = None,
        max_spares: int | None = None,
        max_starting: int | None = None,
        demand_window_s: float = 120.0,
        memory_budget: str | int | None = None,
        budget_counts: str = "use",
        worker_reserve: str | int | None = None,
        queue_timeout_s: float = 60.0,
        user: str | None = None,
        timeout_s: float = 30.0,
        memory_limit: str | int = "1g",
        max_output: int = 100_000,
        idle_expiry_s: float = 1200.0,
        allow_net: Sequence[str] = (),
        dist_dir: Path | str | None = None,
        js_heap_mb: int = 512,
        grace_s: float = 3.0,
        start_timeout_s: float = 90.0,
        reap_interval_s: float | None = None,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        evict_idle: bool = True,
        isolation: str = "auto",
        preload_on_demand: bool = False,
    ) -> None:
        if workers < 1 or spares < 0:
            raise ValueError("workers must be >= 1 and spares >= 0")
        self.warm, self.spares = workers, spares
        self.timeout_s = timeout_s
        self.queue_timeout_s = queue_timeout_s
        self.idle_expiry_s = idle_expiry_s
        self.evict_idle = evict_idle
        self.memory_limit = str(memory_limit)
        tier = memory_tier(memory_limit)
        self._js_heap_mb = js_heap_mb
        self._default_cost = cost = heaps_cost(tier, js_heap_mb)
        self._charges = Charges(budget_counts, cost, worker_reserve)
        self.budget, self.max_containers = pool_sizing(
            workers, spares, max_workers, memory_budget, cost, self._charges.reserve
        )
        self.max_spares, self.max_starting = growth_sizing(spares, max_spares, max_starting)
        self.demand = Demand(window_s=demand_window_s)
        cfg = WorkerConfig(
            dist_dir=checked_dist_dir(dist_dir),
            memory_limit=tier,
            js_heap_mb=js_heap_mb,
            max_output=max_output,
            allow_net=tuple(allow_net),
            grace_s=grace_s,
            start_timeout_s=start_timeout_s,
            preload=tuple(preload),
            user=resolve_user(user),
        )
        self.on_execution: ExecutionHook | None = None
        self._warm = WarmWorkers(
            cfg,
            self._target_idle,
            max_starting=self.max_starting,
            on_started=self.demand.note_start,
            on_ready=lambda w: self._charges.note_ready(w.last_rss),
            preload_on_demand=preload_on_demand,
        )
        self._capacity = Capacity(
            max_live=self.max_containers, budget=self.budget, evictable=self._evictable, evict=self._evict_one
        )
        self._reap_every = reap_interval_s or max(0.5, min(60.0, idle_expiry_s / 4))
        self._containers: dict[str, Container] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._sandbox: SandboxDir | None = None
        self._started = self._closed = False
        self._restarts: collections.Counter[str] = collections.Counter()
        self.isolation_mode = isolation
        self._watchdog = Watchdog(self._workers, on_checked=self._recharge)
        self._binding: set[asyncio.Task[None]] = set()  # containers getting their worker (`_bind_later`)
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
            cfg = self._warm.cfg
            self._sandbox = await asyncio.to_thread(
                prepare_sandbox_dir, cfg.dist_dir, WORKER_SCRIPT, cfg.deno_bin or find_deno()
            )
            confiner = await asyncio.to_thread(detect, self.isolation_mode)
            self._warm.cfg = cfg = dataclasses.replace(
                cfg,
                dist_dir=self._sandbox.dist_dir,
                worker_script=self._sandbox.worker_script,
                deno_bin=self._sandbox.deno_bin,
                cwd=self._sandbox.cwd,
                confiner=confiner,
            )
            log.info("sandbox isolation: %s", self.isolation)
            self._warm.replenish()
            self._reaper = asyncio.create_task(self._reap_loop(), name="pool-reaper")
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
        tasks = [t for t in (self._reaper, self._watching, *self._binding) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        workers = [c.worker for c in self._containers.values() if c.worker]
        self._containers.clear()
        await asyncio.gather(self._warm.aclose(), *(w.kill() for w in workers), return_exceptions=True)
        await asyncio.to_thread(self.cfg.confiner.close)
        if self._sandbox is not None:
            await asyncio.to_thread(remove_sandbox_dir, self._sandbox.root)
            self._sandbox = None

    @property
    def isolation(self) -> str:
        """The walls around each worker, in words: the kernel's mechanism (a cgroup per worker, or none), then
        what holds everywhere (Deno's permissions, RLIMIT_DATA, no_new_privs, the watchdog)."""
        cfg = self.cfg
        user = f"user {cfg.user.name}" if cfg.user else "the server's user"
        kernel = {"cgroup2": "cgroup v2", "cgroup1": "cgroup v1"}.get(cfg.confiner.name)
        per = f"per worker: memory {cfg.limits().memory_bytes >> 20} MiB, {cfg.max_tasks} tasks, {cfg.cpus:g} cpu"
        first = f"{kernel} ({per})" if kernel else f"no cgroup (the watchdog holds {per})"
        return f"{first}; Deno permissions, RLIMIT_DATA, no_new_privs, watchdog; as {user}"

    def _workers(self) -> list[WorkerProcess]:
        """Every started worker: warm ones and those of containers."""
        return [*self._warm.idle, *(c.worker for c in self._containers.values() if c.worker)]

    @property
    def start_errors(self) -> list[str]:
        """The reasons of the last workers that failed to start (each is logged too)."""
        return self._warm.start_errors

    def spare_target(self) -> int:
        """Spare workers wanted now: `spares`, or the recent peak demand up to `max_spares`."""
        return self.demand.target(self.spares, self.max_spares)

    def _target_idle(self) -> int:
        """Warm workers to keep: the warm set less the live containers, at least the spare target while the
        pool may still grow, and only as many as the containers' charges leave room for in the memory budget,
        at the worker reserve each; plus one for each admitted container about to take one."""
        live = self._capacity.live
        spares = self.spare_target()
        want = max(self.warm + self.spares - live, min(spares, self.max_containers - live))
        room = (self.budget - self._capacity.live_bytes) // self._charges.reserve
        return max(0, min(want, room)) + self._about_to_take()

    def _about_to_take(self) -> int:
        """Live containers of the pool's heap without a worker (none yet, or none since theirs died) that
        are not in `take` already (its waiters count there): each will take an idle worker, and its charge is
        in the budget already. Counted as served, a burst admitted at once (workers bound in the background)
        made the pool kill the warm workers its own containers were about to take, and each then waited for
        a start."""
        tier = self._warm.cfg.memory_limit
        unbound = sum(1 for c in self._containers.values() if c.worker is None and c.tier == tier)
        return max(0, unbound - self._warm.taking)

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

    async def _take_worker(self, tier: int) -> WorkerProcess:
        """A fresh warm worker (waits for one being started), or a dedicated one for another memory cap."""
        cfg = self._warm.cfg
        if tier != cfg.memory_limit:  # a caller waits for this start: as lean as `WarmWorkers`' own
            return await self._warm.start_dedicated(
                dataclasses.replace(self._warm.lean_cfg, memory_limit=tier)
            )
        self.demand.note_take()
        try:
            return await self._warm.take(cfg.start_timeout_s + 10)
        except TimeoutError:
            raise InterpreterError(
                f"no warm worker became available within {cfg.start_timeout_s + 10:g} s "
                f"(last start errors: {self.start_errors[-2:]})"
            ) from None

    # -- containers --------------------------------------------------------------------------------
    def _info(self, c: Container) -> ContainerInfo:
        return ContainerInfo(
            id=c.id,
            created_at=c.created_at,
            last_active_at=c.last_active_at,
            expires_after_s=self._expiry_of(c),
            name=c.name,
            memory_limit=c.memory_limit or self.memory_limit,
            owner=c.owner,
        )

    def _get(self, container_id: str) -> Container:
        c = self._containers.get(container_id)
        if c is None:
            raise ContainerNotFound(container_id)
        return c

    def check_memory_limit(self, memory_limit: str | None) -> None:
        if memory_limit is not None:
            cost = heaps_cost(memory_tier(memory_limit), self._js_heap_mb)
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
        cost = heaps_cost(tier, self._js_heap_mb)
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
        self._containers[c.id] = c  # the lock keeps the reaper and evictions off while it gets a worker
        if not wait_for_worker:
            self._bind_later(c)
            return self._info(c)
        async with c.lock:
            try:
                c.worker = await self._take_worker(tier)
            except BaseException:
                if self._containers.pop(c.id, None) is not None:
                    self._capacity.release(c.charge, c.owner, c.tier)
                self._capacity.wake()
                self._replenish()
                raise
            c.last_active_at = time.time()
        self._replenish()
        return self._info(c)

    def _bind_later(self, c: Container) -> None:
        """Get `c` its worker in the background (`create_container(wait_for_worker=False)`); its calls and
        file requests queue on its lock meanwhile, and it is pinned until the lock is held (no eviction in
        between). A worker that cannot be had leaves it without one: its first call tries again and, failing
        too, says why in its result."""

        async def bind() -> None:
            try:
                async with c.lock:
                    c.pins -= 1
                    if self._containers.get(c.id) is not c or c.worker is not None:
                        return
                    try:
                        w = await self._take_worker(c.tier)
                    except InterpreterError as e:
                        log.warning(
                            "container %s got no worker yet (its first call tries again): %s", c.id, e
                        )
                        return
                    if self._containers.get(c.id) is c:
                        c.worker, c.last_active_at = w, time.time()
                    else:  # deleted or the pool closed meanwhile
                        self._warm.discard(w)
            finally:
                self._capacity.wake()
                self._replenish()

        c.pins += 1
        t = asyncio.create_task(bind(), name="pool-bind-worker")
        self._binding.add(t)
        t.add_done_callback(self._binding.discard)

    async def get_container(self, container_id: str) -> ContainerInfo:
        return self._info(self._get(container_id))

    async def list_containers(self) -> list[ContainerInfo]:
        return [self._info(c) for c in self._containers.values()]

    def _remove(self, c: Container) -> None:
        """Forget a container, kill its worker and give its room back (the caller wakes the queue)."""
        if self._containers.pop(c.id, None) is None:
            return
        if c.worker:
            c.worker.interrupt()
        self._warm.discard(c.worker)
        c.worker = None
        self._capacity.release(c.charge, c.owner, c.tier)

    async def delete_container(self, container_id: str) -> None:
        self._remove(self._get(container_id))
        self._capacity.wake()
        self._replenish()

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

    async def _ensure_worker(self, c: Container) -> None:
        """Give the container a live worker (a fresh one if its worker died or was recycled)."""
        if c.worker is not None and c.worker.alive and not c.worker.poisoned:
            return
        if c.worker is not None:  # died while idle: its state is gone
            c.lost_state, c.lost_reason = True, c.worker.exit_reason or "it was recycled"
            self._restarts["crash"] += 1
        self._warm.discard(c.worker)
        c.worker = None
        c.files.clear()
        c.worker = await self._take_worker(c.tier)

    def _after_call(self, c: Container, cause: str) -> None:
        w = c.worker
        if w is not None and (not w.alive or w.poisoned):
            self._restarts[cause] += 1
            self._warm.discard(w)
            c.worker = None
            c.files.clear()
            c.lost_state = True
            self._replenish()

    def _observe(self, seconds: float, outcome: str) -> None:
        if self.on_execution is not None:
            try:
                self.on_execution(seconds, outcome)
            except Exception:
                log.exception("the on_execution hook failed")

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        c = self._get(container_id)
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
                await self._ensure_worker(c)
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
            self._after_call(c, cause)
            self._observe(time.monotonic() - t0, outcome)
        if result.worker_restarted:
            c.lost_state = False  # this result tells the caller
        elif report:
            note = LOST_STATE_NOTE.format(reason=c.lost_reason or "it stopped")
            result = dataclasses.replace(result, logs=note + result.logs, worker_restarted=True)
        return result

    # -- files -------------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _file_requests(self, c: Container) -> AsyncIterator[FileRequest]:
        try:
            async with c.lock:
                c.last_active_at = time.time()
                try:
                    await self._ensure_worker(c)
                    assert c.worker is not None
                    yield functools.partial(c.worker.request, timeout_s=30.0)
                except WorkerDied as e:
                    raise InterpreterError(f"the container's worker died: {e}") from e
                finally:
                    c.last_active_at = time.time()
                    self._after_call(c, "crash")
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
            containers_busy=sum(1 for c in self._containers.values() if c.lock.locked()),
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
            restarts=dict(self._restarts),
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

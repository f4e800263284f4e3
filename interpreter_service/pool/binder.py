"""`Binder`: workers bound to containers: taken from the warm set, replaced when they died, dropped when broken."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable

from interpreter_service.api import InterpreterError
from interpreter_service.pool.containers import Container, ContainerTable
from interpreter_service.pool.demand import Demand
from interpreter_service.pool.warm import WarmWorkers
from interpreter_service.process.worker import WorkerProcess

__all__ = ["Binder"]

log = logging.getLogger("interpreter_service.pool")


class Binder:
    """A container's worker. `take` gets one (a fresh warm worker from `warm`, or one started for the
    container's own memory cap); `ensure` replaces one that died or was recycled between calls (the
    container's state is lost: its next result says so); `after_call` drops one that a call killed or
    poisoned; `bind_later` gets a new container its worker in the background (`pending`: those binds).
    `restarts` counts the workers replaced, by cause. `room()` is called when a background bind ended (the
    admission queue may go on, the warm workers are topped up), `replenish()` when a worker was dropped."""

    def __init__(
        self,
        warm: WarmWorkers,
        demand: Demand,
        containers: ContainerTable,
        *,
        room: Callable[[], None],
        replenish: Callable[[], None],
    ) -> None:
        self.restarts: collections.Counter[str] = collections.Counter()
        self.pending: set[asyncio.Task[None]] = set()  # containers getting their worker (`bind_later`)
        self._warm = warm
        self._demand = demand
        self._containers = containers
        self._room = room
        self._replenish = replenish

    async def take(self, tier: int) -> WorkerProcess:
        """A fresh warm worker (waits for one being started), or a dedicated one for another memory cap."""
        cfg = self._warm.cfg
        if tier != cfg.memory_limit:  # a caller waits for this start: as lean as `WarmWorkers`' own
            return await self._warm.start_dedicated(
                dataclasses.replace(self._warm.lean_cfg, memory_limit=tier)
            )
        self._demand.note_take()
        try:
            return await self._warm.take(cfg.start_timeout_s + 10)
        except TimeoutError:
            raise InterpreterError(
                f"no warm worker became available within {cfg.start_timeout_s + 10:g} s "
                f"(last start errors: {self._warm.start_errors[-2:]})"
            ) from None

    def bind_later(self, c: Container) -> None:
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
                        w = await self.take(c.tier)
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
                self._room()

        c.pins += 1
        t = asyncio.create_task(bind(), name="pool-bind-worker")
        self.pending.add(t)
        t.add_done_callback(self.pending.discard)

    async def ensure(self, c: Container) -> None:
        """Give the container a live worker (a fresh one if its worker died or was recycled)."""
        if c.worker is not None and c.worker.alive and not c.worker.poisoned:
            return
        if c.worker is not None:  # died while idle: its state is gone
            c.lost_state, c.lost_reason = True, c.worker.exit_reason or "it was recycled"
            self.restarts["crash"] += 1
        self._warm.discard(c.worker)
        c.worker = None
        c.files.clear()
        c.worker = await self.take(c.tier)

    def after_call(self, c: Container, cause: str) -> None:
        """Drop the container's worker if the call killed or poisoned it (counted under `cause`)."""
        w = c.worker
        if w is not None and (not w.alive or w.poisoned):
            self.restarts[cause] += 1
            self._warm.discard(w)
            c.worker = None
            c.files.clear()
            c.lost_state = True
            self._replenish()

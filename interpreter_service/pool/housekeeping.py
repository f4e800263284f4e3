"""`IdleContainers`: the pool's idle containers expired on a timer, or evicted to make room for new ones of
their own owner."""

from __future__ import annotations

import asyncio
import logging
import time

from interpreter_service.pool.capacity import Capacity
from interpreter_service.pool.containers import Container

__all__ = ["IdleContainers"]

log = logging.getLogger("interpreter_service.pool")


class IdleContainers:
    """Expiry and eviction for a pool that provides its containers, its `Capacity`, `_remove` (forget one) and
    `_replenish` (top the warm workers up)."""

    evict_idle: bool  # when full, hand the owner's least recently used idle container's room to its new one
    idle_expiry_s: float
    _reap_every: float
    _containers: dict[str, Container]
    _capacity: Capacity

    def _remove(self, c: Container) -> None:
        raise NotImplementedError

    def _replenish(self) -> None:
        raise NotImplementedError

    def _expiry_of(self, c: Container) -> float:
        """Seconds idle after which `c` expires: the pool's, or its own when shorter."""
        return min(c.expires_after_s or self.idle_expiry_s, self.idle_expiry_s)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self._reap_every)
            self.expire_idle()
            self._replenish()  # the spare target falls as demand ages out of its window

    def _idle_of(self, owner: str | None) -> list[Container]:
        """`owner`'s containers that may be evicted (idle, unpinned), least recently used first: a full pool
        makes room for an owner from its own containers only, never from another's."""
        if not self.evict_idle:
            return []
        idle = [
            c for c in self._containers.values() if c.owner == owner and not c.lock.locked() and c.pins == 0
        ]
        return sorted(idle, key=lambda c: c.last_active_at)

    def _evictable(self, owner: str | None) -> list[tuple[int, int]]:
        """(charge, memory limit) of each of `owner`'s evictable containers, the one to evict first first."""
        return [(c.charge, c.tier) for c in self._idle_of(owner)]

    def _evict_one(self, owner: str | None) -> None:
        """Free the room of `owner`'s idle, unpinned container used longest ago (its state is lost, as on
        expiry)."""
        idle = self._idle_of(owner)
        if idle:
            log.info("evicting idle container %s to make room for a new one of its owner", idle[0].id)
            self._remove(idle[0])

    def expire_idle(self) -> list[str]:
        """Delete containers idle longer than their expiry (`idle_expiry_s`, or their own shorter one; not
        those running a call)."""
        now = time.time()
        expired = [
            c
            for c in self._containers.values()
            if now - c.last_active_at > self._expiry_of(c) and not c.lock.locked()
        ]
        for c in expired:
            self._remove(c)
        if expired:
            self._capacity.wake()
            self._replenish()
        return [c.id for c in expired]

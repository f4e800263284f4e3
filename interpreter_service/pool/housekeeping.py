"""`Housekeeper`: the pool's idle containers expired on a timer, or evicted to make room for new ones of
their own owner."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from interpreter_service.pool.containers import Container, ContainerTable

__all__ = ["Housekeeper"]

log = logging.getLogger("interpreter_service.pool")


class Housekeeper:
    """Expiry and eviction over the pool's `containers`.

    `remove(c)` forgets a container and gives its room back; `freed()` is called once containers expired (the
    admission queue may go on, the warm workers are topped up); `tick()` after each round of `run` (the spare
    target falls as demand ages out of its window). With `evict_idle`, a full pool hands the room of an
    owner's least recently used idle container to that owner's new one (`evictable`, `evict_one`)."""

    def __init__(
        self,
        containers: ContainerTable,
        *,
        idle_expiry_s: float,
        evict_idle: bool,
        interval_s: float,
        remove: Callable[[Container], None],
        freed: Callable[[], None],
        tick: Callable[[], None],
    ) -> None:
        self.idle_expiry_s = idle_expiry_s
        self.evict_idle = evict_idle
        self.interval_s = interval_s
        self._containers = containers
        self._remove = remove
        self._freed = freed
        self._tick = tick

    def expiry_of(self, c: Container) -> float:
        """Seconds idle after which `c` expires: the pool's, or its own when shorter."""
        return min(c.expires_after_s or self.idle_expiry_s, self.idle_expiry_s)

    async def run(self) -> None:
        """Every `interval_s`: expire the idle containers, then `tick`."""
        while True:
            await asyncio.sleep(self.interval_s)
            self.expire_idle()
            self._tick()

    def _idle_of(self, owner: str | None) -> list[Container]:
        """`owner`'s containers that may be evicted (idle, unpinned), least recently used first: a full pool
        makes room for an owner from its own containers only, never from another's."""
        if not self.evict_idle:
            return []
        idle = [
            c for c in self._containers.values() if c.owner == owner and not c.lock.locked() and c.pins == 0
        ]
        return sorted(idle, key=lambda c: c.last_active_at)

    def evictable(self, owner: str | None) -> list[tuple[int, int]]:
        """(charge, memory limit) of each of `owner`'s evictable containers, the one to evict first first."""
        return [(c.charge, c.tier) for c in self._idle_of(owner)]

    def evict_one(self, owner: str | None) -> None:
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
            if now - c.last_active_at > self.expiry_of(c) and not c.lock.locked()
        ]
        for c in expired:
            self._remove(c)
        if expired:
            self._freed()
        return [c.id for c in expired]

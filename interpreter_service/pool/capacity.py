"""Container admission: a count and a memory budget, a FIFO of callers waiting for room, memory tiers.

Each container is charged in the budget (see `charges.py`: what its worker uses, at least a floor, or its
caps). The pool grants a container only while the number of live containers stays within `max_live` and
their summed charges plus the newcomer's within the budget; otherwise the caller waits its turn (first come,
first served) until room appears (a container goes away, a charge drops) or an idle one can be evicted, for
at most the queue timeout. A container whose caps alone exceed the whole budget is refused. Room is made by
evicting idle containers of the caller's own owner only; each owner's `OwnerQuota` bounds its share.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from interpreter_service.api import MemoryLimitRefused, OwnerQuota, PoolExhausted, QuotaExceeded
from interpreter_service.sizes import format_size, parse_size

__all__ = [
    "pool_sizing",
    "growth_sizing",
    "available_cores",
    "Capacity",
    "default_memory_budget",
]

BUDGET_SHARE = 0.5  # of the machine's memory, the default budget
NO_QUOTA = OwnerQuota()


def default_memory_budget() -> int:
    """Half of the machine's memory (MemTotal), the default budget of a pool."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(int(line.split()[1]) * 1024 * BUDGET_SHARE)
    except (OSError, ValueError, IndexError):
        pass
    return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * BUDGET_SHARE)


# An idle container that may be evicted, as the budget sees it: (its charge, its memory limit in bytes).
Evictable = tuple[int, int]


@dataclass
class _Waiter:
    charge: int
    granted: asyncio.Future[None]
    owner: str | None = None
    size: int = 0  # its memory limit, which its owner's quota counts
    quota: OwnerQuota = NO_QUOTA


class Capacity:
    """Grants room for containers (`acquire`) in arrival order; `release` gives it back.

    When a request does not fit, idle containers of the same owner may make room, never another owner's:
    `evictable(owner)` lists theirs, the one to evict first first; only if evicting some of them would make
    room does `evict(owner)` get called, as many times as needed (each call frees the first one, calling
    `release` for it). An owner's `OwnerQuota` bounds its own live containers and their summed memory limits.
    A waiter that only its own quota holds back blocks nobody; one that waits for free room keeps it from
    the waiters behind it, who may still swap their own idle containers for new ones. Call `wake()` whenever
    room may have appeared (a container deleted or expired, or one that became idle and so evictable);
    `adjust` (a live container's charge changed) wakes when the charges dropped.
    """

    def __init__(
        self,
        *,
        max_live: int,
        budget: int,
        evictable: Callable[[str | None], list[Evictable]],
        evict: Callable[[str | None], None],
    ) -> None:
        self.max_live = max_live
        self.budget = budget
        self.live = 0  # granted containers
        self.live_bytes = 0  # their summed charges
        self.owned: dict[str | None, list[int]] = {}  # owner -> [its live containers, their memory limits]
        self._evictable = evictable
        self._evict = evict
        self._queue: collections.deque[_Waiter] = collections.deque()
        self._waking = False

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._queue if not w.granted.done())

    def _fits(self, charge: int, live: int | None = None, live_bytes: int | None = None) -> bool:
        live = self.live if live is None else live
        live_bytes = self.live_bytes if live_bytes is None else live_bytes
        return live < self.max_live and live_bytes + charge <= self.budget

    def _within_quota(self, w: _Waiter, gone: int = 0, gone_size: int = 0) -> bool:
        """Whether `w` fits its owner's quota once `gone` of its containers (`gone_size` bytes) went."""
        count, size = self.owned.get(w.owner, [0, 0])
        q = w.quota
        return (not q.max_containers or count - gone < q.max_containers) and (
            not q.max_memory_bytes or size - gone_size + w.size <= q.max_memory_bytes
        )

    def _evictions_for(self, w: _Waiter, share_free: bool) -> int | None:
        """How many of its owner's idle containers to evict (least recently used first) so that `w` fits
        the pool and its quota; None when no number does. Without `share_free` (an earlier waiter waits for
        free room), `w` may only take the room its own evictions free."""
        live, live_bytes, gone_size = self.live, self.live_bytes, 0
        candidates = self._evictable(w.owner)
        for n in range(len(candidates) + 1):
            if n:
                charge, size = candidates[n - 1]
                live, live_bytes, gone_size = live - 1, live_bytes - charge, gone_size + size
            own = share_free or (live < self.live and live_bytes + w.charge <= self.live_bytes)
            if own and self._fits(w.charge, live, live_bytes) and self._within_quota(w, n, gone_size):
                return n
        return None

    def _grant(self, w: _Waiter) -> None:
        self.live += 1
        self.live_bytes += w.charge
        held = self.owned.setdefault(w.owner, [0, 0])
        held[0], held[1] = held[0] + 1, held[1] + w.size

    def release(self, charge: int, owner: str | None = None, size: int = 0) -> None:
        self.live -= 1
        self.live_bytes -= charge
        held = self.owned.get(owner)
        if held is not None:
            held[0], held[1] = held[0] - 1, held[1] - size
            if held[0] <= 0:
                del self.owned[owner]

    def adjust(self, delta: int) -> None:
        """The live containers' charges changed by `delta` bytes: a rise makes later requests wait (nothing
        running is stopped for it), a drop may let waiters in."""
        self.live_bytes += delta
        if delta < 0:
            self.wake()

    def wake(self) -> None:
        """Grant the waiters for whom there is room now, in order (see the class's rules)."""
        if self._waking:  # an eviction inside released room: the outer loop goes on
            return
        self._waking = True
        try:
            holding = False  # an earlier waiter waits for free room
            for w in list(self._queue):
                if w.granted.done():  # gave up
                    self._queue.remove(w)
                    continue
                n = self._evictions_for(w, share_free=not holding)
                if n is None:
                    holding = holding or self._quota_could_allow(w)
                    continue
                for _ in range(n):
                    self._evict(w.owner)
                self._queue.remove(w)
                self._grant(w)
                w.granted.set_result(None)
        finally:
            self._waking = False

    def _quota_could_allow(self, w: _Waiter) -> bool:
        """Whether `w`'s own quota would let it in once its idle containers went (else only it waits)."""
        idle = self._evictable(w.owner)
        return self._within_quota(w, len(idle), sum(size for _, size in idle))

    def check(self, cost: int, what: str, size: int = 0, quota: OwnerQuota = NO_QUOTA) -> None:
        """`MemoryLimitRefused` when a container of `cost` bytes could never fit the budget, or one of
        memory limit `size` its owner's quota."""
        if cost > self.budget:
            raise MemoryLimitRefused(
                f"a container with {what} needs {format_size(cost)} (its memory limit plus the JS heap), more "
                f"than the sandbox's whole memory budget of {format_size(self.budget)}"
            )
        if quota.max_memory_bytes and size > quota.max_memory_bytes:
            raise MemoryLimitRefused(
                f"a container with {what} is more than the {format_size(quota.max_memory_bytes)} of sandbox "
                "memory its project may hold"
            )

    def close(self, exc: Exception) -> None:
        """Fail every waiter with `exc` (the pool is shutting down)."""
        for w in self._queue:
            if not w.granted.done():
                w.granted.set_exception(exc)
        self._queue.clear()

    async def acquire(
        self,
        cost: int,
        timeout_s: float,
        what: str,
        *,
        charge: int | None = None,
        owner: str | None = None,
        size: int = 0,
        quota: OwnerQuota = NO_QUOTA,
    ) -> None:
        """Reserve room for one container of `owner` whose caps cost `cost` bytes, that is charged `charge`
        (default: `cost`) and whose memory limit is `size` bytes, waiting up to `timeout_s`.

        Raises `MemoryLimitRefused` when its caps exceed the whole budget (or its size the quota),
        `QuotaExceeded` on timeout while its owner's quota is full, else `PoolExhausted`. A caller cancelled
        while waiting leaves the queue (room granted meanwhile is given back)."""
        self.check(cost, what, size, quota)
        charge = cost if charge is None else charge
        waiter = _Waiter(charge, asyncio.get_running_loop().create_future(), owner, size, quota)
        self._queue.append(waiter)
        self.wake()  # room now, or evictions of its owner's idle containers, grant it at once
        if waiter.granted.done():
            return
        granted = False
        try:
            async with asyncio.timeout(timeout_s):
                await waiter.granted
            granted = True
        except TimeoutError:
            raise self._exhausted(waiter, timeout_s) from None
        finally:
            if not granted:
                fut = waiter.granted
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    self.release(charge, owner, size)  # granted just as it gave up
                else:
                    waiter.granted.cancel()
                with contextlib.suppress(ValueError):
                    self._queue.remove(waiter)
                self.wake()  # the next in line may fit where this one did not

    def _exhausted(self, w: _Waiter, timeout_s: float) -> PoolExhausted:
        if not self._within_quota(w):
            count, size = self.owned.get(w.owner, [0, 0])
            return QuotaExceeded(
                f"no code-interpreter container within {timeout_s:g} s: its project holds {count} "
                f"container(s) with {format_size(size)} of memory limits, all it may (the quota: "
                f"{w.quota.max_containers or 'any number of'} containers, "
                f"{format_size(w.quota.max_memory_bytes) if w.quota.max_memory_bytes else 'no memory bound'})"
            )
        return PoolExhausted(
            f"no code-interpreter container became free within {timeout_s:g} s (all {self.live} in "
            f"use, {format_size(self.live_bytes)} of the {format_size(self.budget)} memory budget)"
        )


def pool_sizing(
    workers: int,
    spares: int,
    max_workers: int | None,
    memory_budget: str | int | None,
    cost: int,
    charge: int | None = None,
) -> tuple[int, int]:
    """The memory budget in bytes (default: a share of the machine's memory) and the most containers at once
    (`max_workers`, or as many workers charged `charge` as the budget holds). A worker's caps cost `cost`
    bytes and it is charged `charge` (default: `cost`). `ValueError` when the budget cannot hold one worker's
    caps or the warm workers' charges, or the most is under `workers`."""
    budget = parse_size(memory_budget) if memory_budget is not None else default_memory_budget()
    charge = cost if charge is None else charge
    if cost > budget:
        raise ValueError(
            f"the memory budget ({format_size(budget)}) is smaller than one worker's caps "
            f"({format_size(cost)}: memory limit + JS heap)"
        )
    if (workers + spares) * charge > budget:
        what = "memory limit + JS heap" if charge == cost else "their expected use"
        raise ValueError(
            f"the memory budget ({format_size(budget)}) is too small for {workers + spares} warm "
            f"workers of {format_size(charge)} each ({what})"
        )
    most = max_workers if max_workers is not None else budget // charge
    if most < workers:
        raise ValueError(f"max_workers ({most}) must be >= workers ({workers})")
    return budget, most


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


SPARES_PER_CORE = 4  # the default ceiling of adaptive spares, per core


def growth_sizing(
    spares: int, max_spares: int | None, max_starting: int | None, cores: int | None = None
) -> tuple[int, int]:
    """The ceiling of the adaptive spares and the most worker starts at once, from the machine's cores.

    A start keeps about one core busy for seconds, so starts beyond the core count only slow each other:
    `max_starting` defaults to the cores. Warm spares cost memory but no CPU; their default ceiling is
    `SPARES_PER_CORE` × cores (what the machine can start again within a few start times), never under
    `spares`. The memory budget and the most containers bound both further, as the pool runs."""
    cores = cores or available_cores()
    starting = max_starting if max_starting is not None else cores
    if starting < 1:
        raise ValueError("max_starting must be >= 1")
    ceiling = max_spares if max_spares is not None else SPARES_PER_CORE * cores
    return max(spares, ceiling), starting

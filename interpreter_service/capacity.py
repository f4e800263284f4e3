"""Container admission: a count and a memory budget, a FIFO of callers waiting for room, memory tiers.

Each container is charged in the budget (see `charges.py`: what its worker uses, at least a floor, or its
caps). The pool grants a container only while the number of live containers stays within `max_live` and
their summed charges plus the newcomer's within the budget; otherwise the caller waits its turn (first come,
first served) until room appears (a container goes away, a charge drops) or an idle one can be evicted, for
at most the queue timeout. A container whose caps alone exceed the whole budget is refused.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from interpreter_service.api import MemoryLimitRefused, PoolExhausted
from interpreter_service.launch import parse_size

__all__ = [
    "pool_sizing",
    "growth_sizing",
    "available_cores",
    "WASM32_MAX_BYTES",
    "Capacity",
    "default_memory_budget",
    "format_size",
    "memory_tier",
]

# Python runs as 32-bit WebAssembly: its heap can never exceed 4 GiB (65536 pages of 64 KiB).
WASM32_MAX_BYTES = 4 << 30
BUDGET_SHARE = 0.5  # of the machine's memory, the default budget


def format_size(n: int) -> str:
    """Bytes as the largest whole unit: 1073741824 -> '1g', 536870912 -> '512m'."""
    for unit, shift in (("g", 30), ("m", 20), ("k", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n / (1 << 20):.1f}m" if n >= 1 << 20 else str(n)


def memory_tier(memory_limit: str | int) -> int:
    """The WebAssembly heap cap of a `memory_limit` ('1g', '4g', '512m'): its bytes, at most 4 GiB.

    OpenAI's tiers '16g' and '64g' are refused (`MemoryLimitRefused`), not mapped to 4 GiB: code that asked
    for 16 GiB would otherwise meet a MemoryError it had reason not to expect."""
    try:
        size = parse_size(memory_limit)
    except ValueError as e:
        raise MemoryLimitRefused(str(e)) from None
    if size > WASM32_MAX_BYTES:
        raise MemoryLimitRefused(
            f"memory_limit {memory_limit!r} is more than the sandbox can give: Python runs as 32-bit "
            "WebAssembly, which addresses at most 4 GiB; use '1g' or '4g'"
        )
    if size < 64 << 20:
        raise MemoryLimitRefused(f"memory_limit {memory_limit!r} is too small (at least '64m')")
    return size


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


@dataclass
class _Waiter:
    charge: int
    granted: asyncio.Future[None]


class Capacity:
    """Grants room for containers (`acquire`) in arrival order; `release` gives it back.

    When a request does not fit, idle containers may make room: `evictable()` lists their charges, the one to
    evict first first; only if evicting some of them would make room does `evict()` get called, as many
    times as needed (each call frees the first one, calling `release` for it). Call `wake()` whenever room
    may have appeared (a container deleted or expired, or one that became idle and so evictable);
    `adjust` (a live container's charge changed) wakes when the charges dropped.
    """

    def __init__(
        self, *, max_live: int, budget: int, evictable: Callable[[], list[int]], evict: Callable[[], None]
    ) -> None:
        self.max_live = max_live
        self.budget = budget
        self.live = 0  # granted containers
        self.live_bytes = 0  # their summed charges
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

    def _room_for(self, charge: int) -> bool:
        """Whether `charge` fits, evicting idle containers if (and only if) that makes it fit."""
        if self._fits(charge):
            return True
        live, live_bytes, needed = self.live, self.live_bytes, 0
        for idle in self._evictable():
            live, live_bytes, needed = live - 1, live_bytes - idle, needed + 1
            if self._fits(charge, live, live_bytes):
                for _ in range(needed):
                    self._evict()
                return self._fits(charge)
        return False

    def _grant(self, charge: int) -> None:
        self.live += 1
        self.live_bytes += charge

    def release(self, charge: int) -> None:
        self.live -= 1
        self.live_bytes -= charge

    def adjust(self, delta: int) -> None:
        """The live containers' charges changed by `delta` bytes: a rise makes later requests wait (nothing
        running is stopped for it), a drop may let waiters in."""
        self.live_bytes += delta
        if delta < 0:
            self.wake()

    def wake(self) -> None:
        """Grant the waiters at the head of the queue for whom there is room now (in order)."""
        if self._waking:  # an eviction inside released room: the outer loop goes on
            return
        self._waking = True
        try:
            while self._queue:
                head = self._queue[0]
                if head.granted.done():  # gave up
                    self._queue.popleft()
                    continue
                if not self._room_for(head.charge):
                    break
                self._queue.popleft()
                self._grant(head.charge)
                head.granted.set_result(None)
        finally:
            self._waking = False

    def check(self, cost: int, what: str) -> None:
        """`MemoryLimitRefused` when a container of `cost` bytes could never fit the budget."""
        if cost > self.budget:
            raise MemoryLimitRefused(
                f"a container with {what} needs {format_size(cost)} (its memory limit plus the JS heap), more "
                f"than the sandbox's whole memory budget of {format_size(self.budget)}"
            )

    def close(self, exc: Exception) -> None:
        """Fail every waiter with `exc` (the pool is shutting down)."""
        for w in self._queue:
            if not w.granted.done():
                w.granted.set_exception(exc)
        self._queue.clear()

    async def acquire(self, cost: int, timeout_s: float, what: str, *, charge: int | None = None) -> None:
        """Reserve room for one container whose caps cost `cost` bytes and that is charged `charge` (default:
        `cost`), waiting up to `timeout_s` behind earlier callers.

        Raises `MemoryLimitRefused` when its caps exceed the whole budget, `PoolExhausted` on timeout. A caller
        cancelled while waiting leaves the queue (room granted meanwhile is given back)."""
        self.check(cost, what)
        charge = cost if charge is None else charge
        if not self._queue and self._room_for(charge):
            self._grant(charge)
            return
        waiter = _Waiter(charge, asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        self.wake()  # evictions may make room at once
        granted = False
        try:
            async with asyncio.timeout(timeout_s):
                await waiter.granted
            granted = True
        except TimeoutError:
            raise PoolExhausted(
                f"no code-interpreter container became free within {timeout_s:g} s (all {self.live} in "
                f"use, {format_size(self.live_bytes)} of the {format_size(self.budget)} memory budget)"
            ) from None
        finally:
            if not granted:
                fut = waiter.granted
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    self.release(charge)  # granted just as it gave up
                else:
                    waiter.granted.cancel()
                with contextlib.suppress(ValueError):
                    self._queue.remove(waiter)
                self.wake()  # the next in line may fit where this one did not


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

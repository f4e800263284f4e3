"""`PoolConfig`: a `WorkerPool`'s settings, as given (the pool resolves and checks them when it is built)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from interpreter_service.process.launch import DEFAULT_PRELOAD

__all__ = ["PoolConfig"]


@dataclass(frozen=True)
class PoolConfig:
    """What a `WorkerPool` is built from. Sizes are bytes or strings such as '1g' / '512m'; None: the default
    the pool works out (see each field).

    Containers and warm workers:
    - `workers`: warm workers kept for the live containers (at least 1); `spares`: warm workers kept beyond
      them, at least; `max_spares`: the most spares while demand is high (default: 4 per core), counted over
      the last `demand_window_s` seconds; `max_starting`: the most worker starts at once (default: the cores).
    - `max_workers`: the most containers at once (default: as many as `memory_budget` holds at the worker
      reserve); `memory_budget`: what the workers are charged together (default: half the machine's memory);
      `budget_counts`: "use" (a worker's measured RSS, at least `worker_reserve`; default reserve: the largest
      RSS of recently ready workers) or "caps" (its heaps' caps).
    - `queue_timeout_s`: how long a `create_container` waits for room; `evict_idle`: a full pool evicts an
      idle, unpinned container of the same owner (least recently used first) to make room.
    - `idle_expiry_s`: a container idle this long is deleted (checked every `reap_interval_s`, default: a
      quarter of it, between 0.5 and 60 s).

    Each worker:
    - `memory_limit`: the WebAssembly heap cap (a container may ask for its own); `js_heap_mb`: the JS heap
      cap; `timeout_s`: a call's default timeout; `grace_s`: after an interrupt, before the kill;
      `max_output`: characters of logs per call; `start_timeout_s`: the most a start may take.
    - `preload`: what a warm worker imports before it is ready; a start callers wait for imports nothing
      ahead unless `preload_on_demand`.
    - `allow_net`: the hosts its code may reach (none by default); `dist_dir`: the Pyodide distribution
      (default: the one `setup` assembles); `user`: run workers as this user (default: "nobody" when this
      process is root; "" keeps our own); `isolation`: "auto" (a cgroup per worker where the host allows
      one), "cgroup" (required) or "none".
    """

    workers: int = 2
    spares: int = 1
    max_workers: int | None = None
    max_spares: int | None = None
    max_starting: int | None = None
    demand_window_s: float = 120.0
    memory_budget: str | int | None = None
    budget_counts: str = "use"
    worker_reserve: str | int | None = None
    queue_timeout_s: float = 60.0
    user: str | None = None
    timeout_s: float = 30.0
    memory_limit: str | int = "1g"
    max_output: int = 100_000
    idle_expiry_s: float = 1200.0
    allow_net: Sequence[str] = ()
    dist_dir: Path | str | None = None
    js_heap_mb: int = 512
    grace_s: float = 3.0
    start_timeout_s: float = 90.0
    reap_interval_s: float | None = None
    preload: Sequence[str] = DEFAULT_PRELOAD
    evict_idle: bool = True
    isolation: str = "auto"
    preload_on_demand: bool = False

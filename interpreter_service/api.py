"""The interpreter's public Python API: results, container records, errors and the `Interpreter` interface.

The in-process pool (`pool.WorkerPool`) and the HTTP client (`client.HTTPInterpreter`) both implement
`Interpreter`, so the gateway can run the sandbox in its own process or share a pool over HTTP.
"""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal, TypedDict

__all__ = [
    "DATA_DIR",
    "ContainerInfo",
    "ContainerNotFound",
    "ErrorKind",
    "ExecutionResult",
    "FileInfo",
    "Interpreter",
    "InterpreterError",
    "MemoryLimitRefused",
    "OwnerQuota",
    "PoolExhausted",
    "QuotaExceeded",
    "PoolStats",
    "data_path",
]

# The folder a container's code is told to write its outputs to, and where relative file paths point.
DATA_DIR = "/mnt/data"

ErrorKind = Literal["exception", "timeout", "memory", "crashed", "cancelled"]


@dataclass(frozen=True)
class ExecutionResult:
    """What one `execute` call produced.

    - `logs`: stdout and stderr in the order written, then the repr of a final expression (as a
      notebook shows it), then the traceback of an uncaught exception; truncated with a marker past
      the configured cap.
    - `images`: PNG bytes of every matplotlib figure the code left open (closed afterwards).
    - `error`: None on success; else a short message (exception line, "timed out after 30 s", ...).
    - `error_kind`: "exception" for a Python exception (the container lives on); "timeout",
      "memory", "crashed" when the worker was interrupted, recycled or died; "cancelled" when the
      caller went away.
    - `duration_s`: how long the call took, in seconds.
    - `worker_restarted`: True when the container's worker was replaced and its state is gone.
    - `files_changed`: the files under `DATA_DIR` the code created or changed.
    """

    logs: str
    images: tuple[bytes, ...] = ()
    error: str | None = None
    error_kind: ErrorKind | None = None
    duration_s: float = 0.0
    worker_restarted: bool = False
    files_changed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    created_at: float
    last_active_at: float
    expires_after_s: float
    status: Literal["running", "expired"] = "running"
    name: str | None = None
    memory_limit: str | None = None
    # whose it is, as the caller that made it labels it (a gateway serving several tenants: the project)
    owner: str | None = None


@dataclass(frozen=True)
class OwnerQuota:
    """What the containers of one owner may hold at once (0: no bound of its own): how many live, and their
    summed memory limits (`memory_limit`, in bytes). A create past it waits for one of the owner's own
    containers to go (or to become idle, and so evictable), then fails with `QuotaExceeded`."""

    max_containers: int = 0
    max_memory_bytes: int = 0


@dataclass(frozen=True)
class FileInfo:
    id: str
    container_id: str
    path: str
    bytes: int
    created_at: float
    source: Literal["user", "assistant"] = "assistant"


class _PoolCounts(TypedDict):
    """The keys every pool's `stats()` has (see `PoolStats`)."""

    containers_live: int
    containers_busy: int
    workers_idle: int
    workers_starting: int
    waiters: int
    max_containers: int
    memory_budget_bytes: int
    memory_reserved_bytes: int
    restarts: dict[str, int]
    start_failures: int


class PoolStats(_PoolCounts, total=False):
    """A snapshot of a pool, for metrics and health checks (`WorkerPool.stats()`; a plain dict).

    - `containers_live`: containers that exist (each owns a worker, or is getting one);
      `containers_busy`: those running a call now.
    - `workers_idle`: warm workers waiting for a container; `workers_starting`: workers being started.
    - `waiters`: callers queued for a container (`create_container` waiting for room);
      `worker_waiters`: containers with room waiting for a worker to finish starting (none was warm);
      `workers_started`: workers started since the pool began (warm, spare, on demand), a counter.
    - `max_containers`, `memory_budget_bytes`: the limits; `memory_reserved_bytes`: what the budget charges
      the live containers' and the warm and starting workers' processes together, which it bounds: each
      one's measured RSS, at least `worker_reserve_bytes` (the floor; a starting worker is charged that),
      or with `budget_counts="caps"` each one's caps (WebAssembly heap + JS heap, the floor then too);
      `memory_used_bytes`: the workers' RSS as last measured (the watchdog reads it every 250 ms).
    - `restarts`: workers replaced under a container, by cause: "crash" (the process died), "timeout"
      (killed when the code did not yield to an interrupt), "memory" (recycled after a MemoryError),
      "cancelled" (killed when the caller went away and the code did not yield).
    - `start_failures`: workers that failed to start (the reason is logged).
    - `isolation`: the kernel's mechanism holding each worker's limits ("cgroup2", "cgroup1", or "none":
      the watchdog and RLIMIT_DATA only); `watchdog_kills`: workers the watchdog killed past their limits.
    - `spare_target`: warm spares the pool keeps now (its configured spares, more while demand is high);
      `demand_peak`: the most workers taken within one start time lately; `start_limit`: the most worker
      starts at once.
    The keys from `isolation` on, `memory_used_bytes`, `worker_reserve_bytes`, `worker_waiters` and
    `workers_started` may be missing (a service older than them). They are declared in a `total=False`
    class, not as `NotRequired`: under `from __future__ import annotations` Python 3.11 counts a
    `NotRequired` key as required at run time (`__required_keys__`, which the HTTP client checks).
    """

    isolation: str  # not from a service older than the OS limits
    watchdog_kills: int
    spare_target: int  # not from a service older than the adaptive spares
    demand_peak: int
    start_limit: int
    memory_used_bytes: int  # not from a service older than the budget that counts use
    worker_reserve_bytes: int
    worker_waiters: int  # not from a service older than these two
    workers_started: int


def data_path(path: str) -> str:
    """A container file path made absolute: relative paths are under `DATA_DIR`."""
    return posixpath.join(DATA_DIR, path)


class InterpreterError(Exception):
    """Base of the interpreter's errors."""


class ContainerNotFound(InterpreterError):
    """No live container with that id (never created, deleted or expired)."""


class PoolExhausted(InterpreterError):
    """No container could be had within the queue timeout: every one is in use and no more fit."""


class QuotaExceeded(PoolExhausted):
    """No container could be had within the queue timeout because its owner holds all its `OwnerQuota`."""


class MemoryLimitRefused(InterpreterError):
    """A container's `memory_limit` can never be granted (above 4 GiB, or above the whole memory budget)."""


class Interpreter(ABC):
    """A pool of sandboxed Python containers. Use as `async with` (start, warm up; stop, kill all)."""

    async def __aenter__(self) -> Interpreter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    @abstractmethod
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
        """Hand out a warm worker as a new container, waiting (bounded) for room. Raises `PoolExhausted`
        when none can be had in time, `MemoryLimitRefused` for a `memory_limit` that can never be granted.
        `wait_for_worker=False`: answer once its room is granted, with its worker got in the background (a
        cold start, when none is warm); its first call waits for it, and reports in its result when none
        could be had. A response does so, and streams the model's code meanwhile.
        `expires_after_s`: the container's own idle expiry (capped at the pool's), kept with the container so
        that every client of a shared pool sees it. `owner`: an opaque label kept with it and given back in
        its `ContainerInfo` (a gateway keeps tenants apart by it), likewise seen by every client. A full pool
        evicts only idle containers of the same `owner` (never another's) to make room; `quota` bounds what
        that owner's containers hold together (`QuotaExceeded`)."""

    def check_memory_limit(self, memory_limit: str | None) -> None:
        """Raise `MemoryLimitRefused` when a container with this `memory_limit` could never be granted (a
        check before any work; `create_container` applies it too). The default accepts everything."""
        return None

    def pin(self, container_id: str) -> None:
        """Mark a container as in use by a caller between its calls (a running response), so that it is not
        evicted for another caller meanwhile; `unpin` undoes one `pin`. The default does nothing."""
        return None

    def unpin(self, container_id: str) -> None:
        """Undo one `pin` (a no-op for a container that is gone)."""
        return None

    def stats(self) -> PoolStats | None:
        """A snapshot of the pool for metrics and readiness (a remote pool's: as of the last `refresh`);
        None when there is none. The default has none."""
        return None

    async def refresh(self) -> None:
        """Bring `stats()` up to date; raise `InterpreterError` when the pool cannot answer (a remote pool
        that is unreachable or refuses us). The default does nothing (an in-process pool is always current)."""
        return None

    @abstractmethod
    async def get_container(self, container_id: str) -> ContainerInfo:
        """Raises `ContainerNotFound`."""

    @abstractmethod
    async def list_containers(self) -> list[ContainerInfo]: ...

    @abstractmethod
    async def delete_container(self, container_id: str) -> None:
        """Kill the container's worker. Raises `ContainerNotFound`."""

    @abstractmethod
    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        """Run `code` in the container (calls to one container queue; different containers run in
        parallel). A Python exception, timeout, memory error or crash comes back as a result with
        `error` set, never raised. Cancelling the awaiting task interrupts the code. Raises
        `ContainerNotFound` only for an unknown container."""

    @abstractmethod
    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        """Put a file at `data_path(path)` in the container (under `DATA_DIR` unless `path` is absolute)."""

    @abstractmethod
    async def read_file(self, container_id: str, path: str) -> bytes:
        """The content of the file at `data_path(path)`; `InterpreterError` if it is not there."""

    @abstractmethod
    async def delete_file(self, container_id: str, path: str) -> None:
        """Remove the file at `data_path(path)`; `InterpreterError` if it is not there."""

    @abstractmethod
    async def list_files(self, container_id: str) -> list[FileInfo]:
        """Files under `DATA_DIR`, the folder code is told to write its outputs to."""

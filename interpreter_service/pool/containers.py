"""`Container`, the pool's record of one container, and `ContainerTable`, the live ones by id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from interpreter_service.api import ContainerNotFound, FileInfo
from interpreter_service.process.worker import WorkerProcess

__all__ = ["Container", "ContainerTable"]


@dataclass
class Container:
    """One container: its worker, the lock its calls queue on, its room in the budget, its files."""

    id: str
    created_at: float
    last_active_at: float
    name: str | None
    memory_limit: str | None
    cost: int  # the worker's caps: its WebAssembly heap cap + JS heap cap
    charge: int  # bytes charged in the memory budget now (`charges.Charges.of`)
    tier: int  # the WebAssembly heap cap
    worker: WorkerProcess | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    files: dict[str, FileInfo] = field(default_factory=dict)
    lost_state: bool = False  # the worker was replaced and no result has said so yet
    lost_reason: str = ""  # why (the old worker's end), said with that result
    pins: int = 0  # callers using it between calls (never evicted while pinned)
    expires_after_s: float | None = None  # its own idle expiry, when shorter than the pool's
    owner: str | None = None  # the label its creator gave (`ContainerInfo.owner`)


class ContainerTable(Mapping[str, Container]):
    """The pool's live containers by id: read as a mapping, changed by `add` and `pop`."""

    def __init__(self) -> None:
        self._by_id: dict[str, Container] = {}

    def __getitem__(self, container_id: str) -> Container:
        return self._by_id[container_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def live(self, container_id: str) -> Container:
        """The container with this id; `ContainerNotFound` when there is none."""
        c = self._by_id.get(container_id)
        if c is None:
            raise ContainerNotFound(container_id)
        return c

    def add(self, c: Container) -> None:
        self._by_id[c.id] = c

    def pop(self, container_id: str) -> Container | None:
        """Forget the container with this id; it, or None when there was none."""
        return self._by_id.pop(container_id, None)

    def clear(self) -> None:
        self._by_id.clear()

    def workers(self) -> list[WorkerProcess]:
        """The containers' workers (those that have one)."""
        return [c.worker for c in self._by_id.values() if c.worker]

    def busy(self) -> int:
        """Containers running a call now (their lock held)."""
        return sum(1 for c in self._by_id.values() if c.lock.locked())

    def unbound(self, tier: int) -> int:
        """Containers of this WebAssembly heap cap without a worker (none yet, or none since theirs died)."""
        return sum(1 for c in self._by_id.values() if c.worker is None and c.tier == tier)

"""A replica's heartbeat cancels a run another replica asked it to cancel once, not on every beat: the lease
flags the cancel until the run ends, and a second cancel cut short the run's storing of its end (its task
ended, its lease went, and another replica's sweep failed the response before its record said cancelled)."""

from __future__ import annotations

import asyncio
from typing import Any

from vllm_responses.runs.replicas import Replica


class FlaggingStore:
    """Every lease renewal answers that `rid` has a cancel requested; the record is there; nothing abandoned."""

    def __init__(self, rid: str) -> None:
        self.rid = rid

    async def take_lease(self, response_id: str, owner: str, expires_at: float) -> None:
        pass

    async def renew_leases(self, owner: str, expires_at: float) -> list[str]:
        return [self.rid]

    async def get(self, response_id: str) -> Any:
        return object()

    async def abandoned(self, now: float, dead_owner: str | None = None) -> list[str]:
        return []

    async def release_lease(self, response_id: str) -> None:
        pass


class StoringRun:
    """A run still storing its end (not done): counts the cancels it gets."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.cancels = 0

    def cancel(self) -> None:
        self.cancels += 1


async def test_a_run_cancelled_through_another_replica_is_cancelled_once() -> None:
    run = StoringRun()
    replica = Replica(FlaggingStore("resp_1"), {"resp_1": run}, heartbeat_s=0.5, lease_s=4)  # type: ignore[arg-type,dict-item]
    await replica.hold("resp_1")
    for _ in range(3):  # the lease still flags the cancel while the run stores its end
        await replica.beat()
    assert run.cancels == 1
    replica.release_soon("resp_1")
    await asyncio.wait(set(replica._releasing))
    assert "resp_1" not in replica._cancelled  # its lease is gone: nothing of it is kept

"""A run is cancelled once: a replica's heartbeat does not cancel again a run another replica asked it to
cancel (the lease flags the cancel until the run ends), and a second cancel of a `Run` does not cut short its
storing of its end (its task ended, its lease went, and another replica's sweep failed the response before
its record said cancelled)."""

from __future__ import annotations

import asyncio
from typing import Any

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.runs.replicas import Replica
from vllm_responses.runs.run import Run


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
        self.cancel_asked = False
        self.cancels = 0

    def cancel(self) -> None:
        self.cancel_asked = True
        self.cancels += 1


async def test_a_run_cancelled_through_another_replica_is_cancelled_once() -> None:
    run = StoringRun()
    replica = Replica(FlaggingStore("resp_1"), {"resp_1": run}, heartbeat_s=0.5, lease_s=4)  # type: ignore[arg-type,dict-item]
    await replica.hold("resp_1")
    for _ in range(3):  # the lease still flags the cancel while the run stores its end
        await replica.beat()
    assert run.cancels == 1


async def test_a_second_cancel_does_not_cut_short_a_run_storing_its_end() -> None:
    """A real `Run` whose task, cancelled, stores its end under a shield: a second cancel leaves it storing."""
    run = Run(ResponseBuilder({"model": "m"}, include_outputs=False), background=True)
    stored = asyncio.Event()
    release = asyncio.Event()

    async def store_end() -> None:
        await release.wait()
        stored.set()

    async def task() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.shield(store_end())

    run.task = asyncio.create_task(task())
    await asyncio.sleep(0)
    run.cancel()
    await asyncio.sleep(0)
    run.cancel()  # e.g. the client asks again
    await asyncio.sleep(0.01)
    assert not run.task.done()  # still storing its end
    release.set()
    await asyncio.wait({run.task})
    assert stored.is_set() and run.task.cancelled()

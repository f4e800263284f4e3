"""This process as one replica of several on one store: it leases the stored responses it runs, renews them
with a heartbeat that also picks up cancels other replicas asked for, and sweeps (marks failed) the
unfinished responses whose replica stopped, whichever replica that was."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

from vllm_responses.protocol.errors import Conflict, NotFound, Unavailable
from vllm_responses.protocol.status import UNFINISHED
from vllm_responses.runs.records import fail_abandoned
from vllm_responses.runs.run import Run
from vllm_responses.store.base import ResponseStore
from vllm_responses.store.notify import cancel_key, wait_woken

__all__ = ["Replica"]

logger = logging.getLogger(__name__)

# A cancel through another replica: how often the store is read for its end, and how long past one heartbeat
# of the replica running it that is waited for (a local cancel waits up to 10 s for its run to end too).
_CANCEL_POLL_S = 0.1
_CANCEL_WAIT_S = 10.0


class Replica:
    """Leases for the runs in `runs` (the service's table) that `hold` was called for.

    Parameters
    ----------
    store: the shared store.
    runs: the live runs of this process, by response id (a cancel request is played on them).
    replica_id: this process's name in the leases (default: random); a process restarted with the same
        name fails the responses its previous life left running at once, not after their lease expires.
    heartbeat_s: seconds between renewals, cancel checks and sweeps.
    lease_s: how long a lease lasts unrenewed.
    """

    def __init__(
        self,
        store: ResponseStore,
        runs: dict[str, Run],
        *,
        replica_id: str | None = None,
        heartbeat_s: float = 2.0,
        lease_s: float = 20.0,
    ) -> None:
        self.store = store
        self.runs = runs
        self.id = replica_id or f"replica-{uuid.uuid4().hex[:12]}"
        self.heartbeat_s = max(heartbeat_s, 0.05)
        self.lease_s = max(lease_s, 2 * heartbeat_s)
        self._held: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._releasing: set[asyncio.Task[None]] = set()

    async def hold(self, response_id: str) -> None:
        """Lease `response_id` for this replica: before its first record is written, so that no sweep ever
        sees it unfinished and unleased."""
        self._held.add(response_id)
        await self.store.take_lease(response_id, self.id, time.time() + self.lease_s)

    def release_soon(self, response_id: str) -> None:
        """Drop the lease of a run that ended (its last record written): in a task of its own."""
        if response_id in self._held:
            task = asyncio.get_running_loop().create_task(self._release(response_id))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _release(self, response_id: str) -> None:
        try:
            await self.store.release_lease(response_id)
        except Exception:
            logger.warning("could not release the lease of response %s", response_id, exc_info=True)
        finally:
            self._held.discard(response_id)

    async def start(self) -> None:
        """Sweep once (the responses of a dead replica, or of this one's previous life), then beat."""
        try:
            await self.sweep(dead_owner=self.id)
        except Exception:
            logger.exception("could not sweep the responses of stopped replicas")
        self._task = asyncio.get_running_loop().create_task(self._beat(), name=f"heartbeat {self.id}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._releasing:  # the leases of the runs that just ended, before the store closes
            await asyncio.wait(set(self._releasing), timeout=5)

    async def sweep(self, dead_owner: str | None = None) -> int:
        """Mark failed the unfinished responses whose lease expired (or that have none, or that `dead_owner`
        held). Returns how many."""
        ids = await self.store.abandoned(time.time(), dead_owner)
        ids = [rid for rid in ids if rid not in self._held]  # never one this process runs
        return await fail_abandoned(self.store, ids)

    async def beat(self) -> None:
        """One heartbeat: renew this replica's leases, cancel the runs another replica asked to, sweep."""
        if self._held:
            for rid in await self.store.renew_leases(self.id, time.time() + self.lease_s):
                run = self.runs.get(rid)
                if run is None or run.done.is_set() or run.cancel_asked:  # the lease flags it until it ends
                    continue
                if await self.store.get(rid) is None:  # deleted through another replica: as a local delete
                    self.runs.pop(rid, None)  # (the run's end is then not stored)
                logger.info("response %s cancelled through another replica", rid)
                run.cancel()  # as a local cancel: the run ends `cancelled`, stored, then its lease goes
        await self.sweep()

    async def cancel_elsewhere(self, response_id: str) -> None:
        """Cancel a response this replica does not run: flag its lease for the replica that runs it (its next
        heartbeat cancels it), then wait, bounded, for the store to show it ended. Not found: 404; not
        running anywhere (ended, foreground, or orphaned): 409; no end seen in time: 503."""
        stored = await self.store.get(response_id)
        if stored is None:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        if not stored.response.get("background"):  # a foreground one running elsewhere: as a local cancel
            raise Conflict(
                "Only responses created with background=true can be cancelled.", param="response_id"
            )
        if stored.response.get("status") not in UNFINISHED or not await self.store.request_cancel(
            response_id
        ):
            raise Conflict(
                "Only background responses that are still running can be cancelled.", param="response_id"
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.heartbeat_s + _CANCEL_WAIT_S
        while loop.time() < deadline:
            await asyncio.sleep(_CANCEL_POLL_S)
            now = await self.store.get(response_id)
            if now is None:
                raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
            if now.response.get("status") not in UNFINISHED:
                return
        raise Unavailable(
            "The replica running this response did not confirm its cancellation in time; it is requested: "
            "retrieve the response later.",
            code="cancel_pending",
        )

    async def _beat(self) -> None:
        """A beat every `heartbeat_s`, and at once when another replica's cancel request notifies us."""
        with self.store.notices.waiter(cancel_key(self.id)) as woken:
            while True:
                await wait_woken(woken, self.heartbeat_s)
                try:
                    await self.beat()
                except Exception:
                    logger.warning("replica heartbeat failed (retried next beat)", exc_info=True)

"""`VectorStoreSweep`: what vector stores keep and no one can use any more, deleted in the background, a bounded
amount each pass: the files' rows and chunks of expired vector stores (the vector store itself stays, `expired`,
empty), and the vector store files of Files API files that are gone (expired, or deleted through another path
than `DELETE /v1/files`, which removes them at once).

Every replica sharing the database sweeps, at each replica heartbeat (as the sweep of abandoned responses); each
pass's work is idempotent, so two replicas sweeping the same vector store only repeat deletes. Expiry is judged by
the service's `clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from vllm_responses.service.vector_stores import VectorStoreService

__all__ = ["STORES_PER_PASS", "VectorStoreSweep"]

logger = logging.getLogger(__name__)

STORES_PER_PASS = 8  # expired vector stores emptied in one pass
FILES_PER_PASS = 64  # Files API files looked up in one pass, in turn (by id, from where the last pass ended)


class VectorStoreSweep:
    """Passes over `service`'s rows every `interval_s` (see the module docstring)."""

    def __init__(self, service: VectorStoreService, interval_s: float) -> None:
        self.service = service
        self.interval_s = max(0.05, interval_s)
        self.swept_stores = 0
        self.forgotten_files = 0
        self._after = ""  # the last file id looked up: the next pass goes on from there
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="vector-store-sweep")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel("the server is shutting down")
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:  # the database busy or gone: tried again at the next pass
                logger.exception("vector store sweep failed")
            await asyncio.sleep(self.interval_s)

    async def sweep(self) -> None:
        """One pass: up to `STORES_PER_PASS` expired vector stores emptied, up to `FILES_PER_PASS` files checked."""
        svc = self.service
        for store_id in await svc.rows.expired_stores(svc.clock(), STORES_PER_PASS):
            await svc.rows.empty_store(store_id)
            svc.ingestion.stop(store_id)
            await svc.index.delete_store(store_id)
            self.swept_stores += 1
            logger.info("vector store %s expired: its files and chunks deleted", store_id)
        await self._gone_files()

    async def _gone_files(self) -> None:
        svc = self.service
        ids = await svc.rows.file_ids(self._after, FILES_PER_PASS)
        self._after = ids[-1] if len(ids) == FILES_PER_PASS else ""  # from the start again once all were seen
        now = svc.clock()
        for file_id in ids:
            stored = await svc.files.store.get_file(file_id)
            if stored is None or (stored.expires_at is not None and stored.expires_at <= now):
                self.forgotten_files += await svc.forget_file(file_id)

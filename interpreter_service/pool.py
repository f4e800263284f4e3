"""`WorkerPool`: pre-warmed Deno/Pyodide workers handed out one per container, replaced on crash or recycle."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from interpreter_service.api import (
    DATA_DIR,
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    PoolExhausted,
    data_path,
)
from interpreter_service.distribution import default_dist_dir
from interpreter_service.worker import Reply, WorkerConfig, WorkerDied, WorkerProcess, parse_size

__all__ = ["WorkerPool"]

log = logging.getLogger(__name__)


@dataclass
class _Container:
    id: str
    created_at: float
    last_active_at: float
    name: str | None
    memory_limit: str | None
    worker: WorkerProcess | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    files: dict[str, FileInfo] = field(default_factory=dict)
    lost_state: bool = False  # the worker was replaced and no result has said so yet


class WorkerPool(Interpreter):
    """At most `workers` containers at once; `workers + spares` warm processes are kept ready."""

    def __init__(
        self,
        *,
        workers: int = 2,
        spares: int = 1,
        timeout_s: float = 30.0,
        memory_limit: str | int = "1g",
        max_output: int = 100_000,
        idle_expiry_s: float = 1200.0,
        allow_net: Sequence[str] = (),
        dist_dir: Path | str | None = None,
        js_heap_mb: int = 512,
        grace_s: float = 3.0,
        start_timeout_s: float = 90.0,
        reap_interval_s: float | None = None,
        preload: Sequence[str] = ("numpy", "matplotlib"),
        evict_idle: bool = True,
    ) -> None:
        self.max_containers = workers
        if self.max_containers < 1 or spares < 0:
            raise ValueError("workers must be >= 1 and spares >= 0")
        self.spares = spares
        self.timeout_s = timeout_s
        self.idle_expiry_s = idle_expiry_s
        # When every slot is taken, hand the least recently used idle container's slot to the new one
        # (instead of refusing until it expires); PoolExhausted then means every container is running code.
        self.evict_idle = evict_idle
        self.memory_limit = str(memory_limit)
        dist = Path(dist_dir).expanduser() if dist_dir else default_dist_dir()
        if not (dist / "pyodide.mjs").is_file() or not (dist / "pyodide-lock.json").is_file():
            raise InterpreterError(
                f"no Pyodide distribution in {dist}: run `python -m interpreter_service setup` first"
            )
        self.cfg = WorkerConfig(
            dist_dir=dist.resolve(),
            memory_limit=parse_size(memory_limit),
            js_heap_mb=js_heap_mb,
            max_output=max_output,
            allow_net=tuple(allow_net),
            grace_s=grace_s,
            start_timeout_s=start_timeout_s,
            preload=tuple(preload),
        )
        self._reap_every = reap_interval_s or max(0.5, min(60.0, idle_expiry_s / 4))
        self._containers: dict[str, _Container] = {}
        self._idle: list[WorkerProcess] = []
        self._idle_cv = asyncio.Condition()
        self._starting: set[asyncio.Task[None]] = set()
        self._bg: set[asyncio.Task[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        self.start_errors: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._replenish()
        self._reaper = asyncio.create_task(self._reap_loop(), name="pool-reaper")
        async with asyncio.timeout(self.cfg.start_timeout_s + 30):
            while self._starting:
                await asyncio.wait(set(self._starting))
        if not self._idle:
            raise InterpreterError(f"no worker could be started: {self.start_errors[-1:]}")

    async def aclose(self) -> None:
        self._closed = True
        tasks = [*self._starting, *self._bg, *([self._reaper] if self._reaper else [])]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        workers = [*self._idle, *(c.worker for c in self._containers.values() if c.worker)]
        self._idle.clear()
        self._containers.clear()
        await asyncio.gather(*(w.kill() for w in workers), return_exceptions=True)

    def _target_idle(self) -> int:
        return max(0, self.max_containers + self.spares - len(self._containers))

    def _replenish(self) -> None:
        if self._closed:
            return
        self._idle = [w for w in self._idle if w.alive]
        for _ in range(self._target_idle() - len(self._idle) - len(self._starting)):
            t = asyncio.create_task(self._start_one(), name="pool-start-worker")
            self._starting.add(t)
            t.add_done_callback(self._starting.discard)

    async def _start_one(self) -> None:
        w = WorkerProcess(self.cfg)
        try:
            await w.start()
        except asyncio.CancelledError:
            await w.kill()
            raise
        except (WorkerDied, InterpreterError, OSError, TimeoutError) as e:
            self.start_errors.append(f"{type(e).__name__}: {e}")
            log.error("worker failed to start: %s", e)
            await w.kill()
            return
        async with self._idle_cv:
            if self._closed:
                await w.kill()
                return
            self._idle.append(w)
            self._idle_cv.notify()

    async def _take_worker(self, memory_limit: str | None) -> WorkerProcess:
        """A fresh warm worker (waits for one being started), or a dedicated one for another memory cap."""
        if memory_limit is not None and parse_size(memory_limit) != self.cfg.memory_limit:
            w = WorkerProcess(dataclasses.replace(self.cfg, memory_limit=parse_size(memory_limit)))
            await w.start()
            return w
        try:
            return await self._wait_for_idle()
        except TimeoutError:
            raise InterpreterError(
                f"no warm worker became available within {self.cfg.start_timeout_s + 10:g} s "
                f"(last start errors: {self.start_errors[-2:]})"
            ) from None

    async def _wait_for_idle(self) -> WorkerProcess:
        async with asyncio.timeout(self.cfg.start_timeout_s + 10):
            async with self._idle_cv:
                while True:
                    self._idle = [w for w in self._idle if w.alive]
                    if self._idle:
                        w = self._idle.pop(0)
                        self._replenish()
                        return w
                    if not self._starting:
                        self._replenish()
                        if not self._starting:  # target reached but nothing idle: start one anyway
                            t = asyncio.create_task(self._start_one())
                            self._starting.add(t)
                            t.add_done_callback(self._starting.discard)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1.0):  # also re-check after failed starts
                            await self._idle_cv.wait()

    def _discard_worker(self, w: WorkerProcess | None) -> None:
        if w is None:
            return
        t = asyncio.create_task(w.kill(), name="pool-kill-worker")
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    # -- containers --------------------------------------------------------------------------------
    def _info(self, c: _Container) -> ContainerInfo:
        return ContainerInfo(
            id=c.id,
            created_at=c.created_at,
            last_active_at=c.last_active_at,
            expires_after_s=self.idle_expiry_s,
            name=c.name,
            memory_limit=c.memory_limit or self.memory_limit,
        )

    def _get(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:
            raise ContainerNotFound(container_id)
        return c

    async def create_container(
        self, *, name: str | None = None, memory_limit: str | None = None
    ) -> ContainerInfo:
        if not self._started or self._closed:
            raise InterpreterError("the pool is not running")
        if len(self._containers) >= self.max_containers and self.evict_idle:
            self._evict_least_recent()
        if len(self._containers) >= self.max_containers:
            raise PoolExhausted(
                f"all {self.max_containers} code-interpreter workers are in use; delete a container or retry later"
            )
        now = time.time()
        c = _Container(
            id="cntr_" + secrets.token_hex(12),
            created_at=now,
            last_active_at=now,
            name=name,
            memory_limit=memory_limit,
            worker=None,
        )
        self._containers[c.id] = c  # reserve the slot before awaiting; the lock keeps the reaper off
        async with c.lock:
            try:
                c.worker = await self._take_worker(memory_limit)
            except BaseException:
                self._containers.pop(c.id, None)
                self._replenish()
                raise
            c.last_active_at = time.time()
        return self._info(c)

    async def get_container(self, container_id: str) -> ContainerInfo:
        return self._info(self._get(container_id))

    async def list_containers(self) -> list[ContainerInfo]:
        return [self._info(c) for c in self._containers.values()]

    async def delete_container(self, container_id: str) -> None:
        c = self._containers.pop(container_id, None)
        if c is None:
            raise ContainerNotFound(container_id)
        if c.worker:
            c.worker.interrupt()
        self._discard_worker(c.worker)
        c.worker = None
        self._replenish()

    async def _ensure_worker(self, c: _Container) -> None:
        """Give the container a live worker (a fresh one if its worker died or was recycled)."""
        if c.worker is not None and c.worker.alive and not c.worker.poisoned:
            return
        if c.worker is not None:  # died while idle: its state is gone
            c.lost_state = True
        self._discard_worker(c.worker)
        c.worker = None
        c.files.clear()
        c.worker = await self._take_worker(c.memory_limit)

    def _after_call(self, c: _Container) -> None:
        w = c.worker
        if w is not None and (not w.alive or w.poisoned):
            self._discard_worker(w)
            c.worker = None
            c.files.clear()
            c.lost_state = True
            self._replenish()

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        c = self._get(container_id)
        async with c.lock:
            if container_id not in self._containers:
                raise ContainerNotFound(container_id)
            c.last_active_at = time.time()
            try:
                try:
                    await self._ensure_worker(c)
                except InterpreterError as e:  # WorkerDied included: no worker could be had
                    return ExecutionResult(
                        logs="",
                        error=f"no worker available: {e}",
                        error_kind="crashed",
                        worker_restarted=True,
                    )
                report, c.lost_state = c.lost_state, False  # a loss no result has reported yet
                assert c.worker is not None
                result = await c.worker.execute(code, timeout_s=timeout_s or self.timeout_s)
            finally:
                c.last_active_at = time.time()
                self._after_call(c)
            if result.worker_restarted:
                c.lost_state = False  # this result tells the caller
            elif report:
                result = dataclasses.replace(result, worker_restarted=True)
        return result

    # -- files -------------------------------------------------------------------------------------
    async def _file_request(self, c: _Container, op: str, **fields: object) -> Reply:
        async with c.lock:
            c.last_active_at = time.time()
            try:
                await self._ensure_worker(c)
                assert c.worker is not None
                return await c.worker.request(op, timeout_s=30.0, **fields)
            except WorkerDied as e:
                raise InterpreterError(f"the container's worker died: {e}") from e
            finally:
                self._after_call(c)

    def _file_info(
        self, c: _Container, path: str, size: int, source: Literal["user", "assistant"]
    ) -> FileInfo:
        old = c.files.get(path)
        fid = "cfile_" + hashlib.sha256(f"{c.id}:{path}".encode()).hexdigest()[:24]
        info = FileInfo(
            id=fid,
            container_id=c.id,
            path=path,
            bytes=size,
            created_at=old.created_at if old else time.time(),
            source=old.source if old else source,
        )
        c.files[path] = info
        return info

    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        c = self._get(container_id)
        full = data_path(path)
        reply = await self._file_request(c, "write_file", path=full, data_b64=base64.b64encode(data).decode())
        c.files.pop(reply["path"], None)
        return self._file_info(c, reply["path"], int(reply["bytes"]), "user")

    async def read_file(self, container_id: str, path: str) -> bytes:
        c = self._get(container_id)
        full = data_path(path)
        try:
            reply = await self._file_request(c, "read_file", path=full)
        except InterpreterError as e:
            raise InterpreterError(f"cannot read {full}: {e}") from e
        return base64.b64decode(reply["data_b64"])

    async def delete_file(self, container_id: str, path: str) -> None:
        c = self._get(container_id)
        full = data_path(path)
        try:
            reply = await self._file_request(c, "delete_file", path=full)
        except InterpreterError as e:
            raise InterpreterError(f"cannot delete {full}: {e}") from e
        c.files.pop(reply["path"], None)

    async def list_files(self, container_id: str) -> list[FileInfo]:
        c = self._get(container_id)
        reply = await self._file_request(c, "list_files", dir=DATA_DIR)
        return [self._file_info(c, f["path"], int(f["bytes"]), "assistant") for f in reply["files"]]

    # -- housekeeping ------------------------------------------------------------------------------
    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self._reap_every)
            self.expire_idle()

    def _evict_least_recent(self) -> str | None:
        """Free the slot of the idle container used longest ago (its state is lost, as on expiry)."""
        idle = [c for c in self._containers.values() if not c.lock.locked()]
        if not idle:
            return None
        victim = min(idle, key=lambda c: c.last_active_at)
        del self._containers[victim.id]
        self._discard_worker(victim.worker)
        victim.worker = None
        return victim.id

    def expire_idle(self) -> list[str]:
        """Delete containers idle longer than `idle_expiry_s` (not those running a call)."""
        cutoff = time.time() - self.idle_expiry_s
        expired = [
            c.id for c in self._containers.values() if c.last_active_at < cutoff and not c.lock.locked()
        ]
        for cid in expired:
            c = self._containers.pop(cid)
            self._discard_worker(c.worker)
            c.worker = None
        if expired:
            self._replenish()
        return expired

    async def wait_warm(self, timeout_s: float | None = None) -> None:
        """Wait until no worker is starting (the warm pool is at its target size)."""
        async with asyncio.timeout(timeout_s or self.cfg.start_timeout_s + 10):
            while self._starting:
                await asyncio.wait(set(self._starting))

    def stats(self) -> dict[str, object]:
        return {
            "containers": len(self._containers),
            "max_containers": self.max_containers,
            "idle_workers": len(self._idle),
            "starting_workers": len(self._starting),
            "worker_rss_bytes": [w.rss_bytes() for w in self._idle]
            + [c.worker.rss_bytes() for c in self._containers.values() if c.worker],
        }

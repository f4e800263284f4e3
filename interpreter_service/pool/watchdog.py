"""The pool's watchdog: kills a worker past its memory or thread limit, or one that runs with no call in flight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from interpreter_service.process.procfs import proc_status, thread_cpu
from interpreter_service.process.worker import WorkerProcess

__all__ = ["Watchdog"]

log = logging.getLogger("interpreter_service.pool")
IDLE_CPU_SHARE = 0.2  # of one core, with no call in flight: something the code left behind is running
IDLE_STRIKES = 4  # consecutive checks over that share before the worker is killed
# V8's platform threads compile hot WebAssembly with its optimising tier and help the garbage collector in
# the background, for what the main thread ran: after a worker's first calls that can take most of a core
# for a second or more with no call in flight. Their CPU counts as idle CPU only beyond this share of a core.
V8_HELPERS = "V8 DefaultWorke"  # their thread name (Linux keeps 15 characters of "V8 DefaultWorker")
V8_HELPERS_SHARE = 1.0


@dataclass
class _Seen:
    cpu_s: float  # the process's CPU time
    # of which V8's platform threads (read only when the process was not quiet)
    helpers_s: float | None = None
    strikes: int = 0


class Watchdog:
    """Every `interval_s`, reads each worker's memory, threads and CPU from /proc and kills one that passed
    its limits (`WorkerConfig.limits()`), or that used over a fifth of a core for `IDLE_STRIKES` checks running
    while no call was in flight (threads or timers the code left running after its call ended; V8's own
    background threads count only beyond `V8_HELPERS_SHARE` of a core).

    Where the kernel enforces the limits (a cgroup per worker) the memory and thread checks only come second;
    where it cannot, they are the limit, checked this often (a fast allocation can overshoot in between).
    The RSS it reads is kept as each worker's `last_rss` (what the pool's budget charges), and `on_checked`,
    when given, is called after each round."""

    def __init__(
        self,
        workers: Callable[[], Iterable[WorkerProcess]],
        interval_s: float = 0.25,
        on_checked: Callable[[], None] | None = None,
    ) -> None:
        self._workers = workers
        self.interval_s = interval_s
        self._on_checked = on_checked
        self._seen: dict[int, _Seen] = {}
        self.kills = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception:  # never let one bad read stop the watch
                log.exception("the sandbox watchdog failed a check")

    async def check(self) -> None:
        seen: dict[int, _Seen] = {}
        for w in list(self._workers()):
            if not w.alive or w.pid is None:
                continue
            reason = self._verdict(w, seen)
            if reason:
                self.kills += 1
                log.warning("sandbox worker %s killed: %s", w.pid, reason)
                await w.kill_for(reason)
        self._seen = seen
        if self._on_checked is not None:
            self._on_checked()

    def _verdict(self, w: WorkerProcess, seen: dict[int, _Seen]) -> str | None:
        st = proc_status(w.pid)
        w.last_rss = st.rss_bytes
        limits = w.cfg.limits()
        if st.rss_bytes > limits.memory_bytes:
            return f"its memory ({st.rss_bytes >> 20} MiB) passed the limit ({limits.memory_bytes >> 20} MiB)"
        if st.tasks > limits.tasks:
            return f"it ran {st.tasks} threads, over the limit of {limits.tasks}"
        assert w.pid is not None
        before = self._seen.get(w.pid)
        now = seen[w.pid] = _Seen(st.cpu_s)
        if before is None or w.busy:
            return None
        return self._idle_verdict(w.pid, before, now)

    def _idle_verdict(self, pid: int, before: _Seen, now: _Seen) -> str | None:
        """Strikes for CPU used with no call in flight. A quiet worker (the whole process under the share)
        costs one /proc read: its threads are read only when it was not, to tell V8's helpers apart. Where
        their figure at the last check is missing (it was quiet, or busy), only what even V8's share cannot
        explain counts, and otherwise the strikes stand as they were: a worker left spinning is struck from
        its second check on."""
        spent = now.cpu_s - before.cpu_s
        share = IDLE_CPU_SHARE * self.interval_s
        if spent <= share:
            return None  # strikes start again
        now.helpers_s = thread_cpu(pid).get(V8_HELPERS, 0.0)
        if before.helpers_s is None:
            idle = max(0.0, spent - V8_HELPERS_SHARE * self.interval_s)
            now.strikes = before.strikes + 1 if idle > share else before.strikes
        else:
            helpers = max(0.0, now.helpers_s - before.helpers_s)
            idle = max(0.0, spent - helpers) + max(0.0, helpers - V8_HELPERS_SHARE * self.interval_s)
            now.strikes = before.strikes + 1 if idle > share else 0
        if now.strikes >= IDLE_STRIKES:
            return "it kept running with no call in flight (threads or timers its code left behind)"
        return None

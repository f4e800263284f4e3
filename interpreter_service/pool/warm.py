"""`WarmWorkers`: started workers no container owns yet, kept at a target count and handed out one at a time."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

from interpreter_service.process.launch import WorkerConfig
from interpreter_service.process.worker import WorkerDied, WorkerProcess

__all__ = ["WarmWorkers"]

log = logging.getLogger("interpreter_service.pool")


class WarmWorkers:
    """Warm workers of one configuration (`cfg`), started in the background up to `target()` plus the
    callers waiting in `take`; surplus ones (the target shrank) are killed. Callers are served first come,
    first served: a worker that finishes starting goes to the longest waiting caller, and a newcomer takes
    an idle worker only when nobody waits. At most `max_starting` workers start at once (the rest of the
    target waits for a start to end): starts share the CPU, so more at once only makes each one slower.
    Workers that fail to start are counted (`start_failures`) and logged with the reason (`start_errors`
    keeps the last ones); `on_started(seconds)` is told how long each successful start of a warm worker took,
    and `on_ready(worker)` sees every worker started here (warm or not) once it is ready.

    A start that callers wait for (more of them waiting than workers starting) runs without `cfg.preload`
    unless `preload_on_demand`: the caller's code imports what it needs, from the start cache, at about the
    cost the preload would have had, and code that needs none of it does not wait for it (a bare worker is
    ready in under half the time). Starts ahead of demand (spares) preload. When callers wait with every start
    slot taken, a spare's start begun less than `preempt_within_s` ago gives its slot to a lean start (it is
    stopped: it had done little, and its full start would serve the caller later than a lean one); the spare
    is started again once nobody waits. A burst arriving at once would otherwise wait for the spares its first
    container set off."""

    preempt_within_s = 0.5  # a spare's start this young is stopped for a caller's lean start

    def __init__(
        self,
        cfg: WorkerConfig,
        target: Callable[[], int],
        *,
        max_starting: int = 1 << 30,
        on_started: Callable[[float], None] | None = None,
        on_ready: Callable[[WorkerProcess], None] | None = None,
        preload_on_demand: bool = False,
    ) -> None:
        if max_starting < 1:
            raise ValueError("max_starting must be >= 1")
        self.cfg = cfg
        self.preload_on_demand = preload_on_demand
        self._target = target
        self.max_starting = max_starting
        self.peak_starting = 0  # the most starts ever in progress at once
        self._on_started = on_started
        self._on_ready = on_ready
        self.idle: list[WorkerProcess] = []
        self.starting: set[asyncio.Task[None]] = set()
        self._lean: set[asyncio.Task[None]] = set()  # the starts in `starting` that run `lean_cfg`
        self._begun: dict[asyncio.Task[None], float] = {}  # when each start in `starting` began
        self.start_errors: list[str] = []
        self.start_failures = 0
        self.started = 0  # workers started here so far (warm, spare, on demand, dedicated)
        self.closed = False
        self._waiters: collections.deque[asyncio.Future[WorkerProcess]] = collections.deque()
        self.taking = 0  # callers inside `take`: waiting, or handed a worker `take` has not returned yet
        self._dedicated = 0  # `start_dedicated` starts in progress (they hold start slots too)
        self._dedicated_turns: collections.deque[asyncio.Future[None]] = collections.deque()
        self._bg: set[asyncio.Task[None]] = set()
        self._said_no_data_limit = False

    @property
    def lean_cfg(self) -> WorkerConfig:
        """What a start a caller waits for runs: `cfg` without its preloads, unless `preload_on_demand`."""
        return self.cfg if self.preload_on_demand else dataclasses.replace(self.cfg, preload=())

    @property
    def waiting(self) -> int:
        """Callers in `take` still waiting for a worker."""
        return sum(1 for f in self._waiters if not f.done())

    @property
    def awaiting_starts(self) -> int:
        """Callers waiting for a worker to finish starting: in `take`, or for a dedicated start."""
        return self.waiting + self._dedicated + self._dedicated_waiting()

    @property
    def idle_count(self) -> int:
        return sum(1 for w in self.idle if w.alive)

    def replenish(self) -> None:
        """Start workers up to the target, or kill the surplus (a dedicated start waiting for a slot gets it
        first)."""
        if self.closed:
            return
        self._grant_dedicated()
        self.idle = [w for w in self.idle if w.alive]
        target = max(0, self._target()) + self.waiting
        starting = self._live_starts()
        excess = len(self.idle) + len(starting) - target
        for t in starting[: max(0, excess)]:  # not needed any more: stop those first (nothing warm is lost)
            t.cancel()
        while excess > len(starting) and self.idle:
            self.discard(self.idle.pop())
            excess -= 1
        self._preempt_spares()
        for _ in range(min(-excess, self._free_slots())):
            self._spawn()

    def _free_slots(self) -> int:
        return self.max_starting - len(self.starting) - self._dedicated

    def _preempt_spares(self) -> None:
        """Callers wait beyond the lean starts under way and no start slot is free: stop the spares' starts
        begun less than `preempt_within_s` ago, each replaced at once by a lean start."""
        if self.preload_on_demand:
            return
        live = self._live_starts()
        lean = sum(1 for t in live if t in self._lean)
        uncovered = self.waiting - lean + self._dedicated_waiting() - max(0, self._free_slots())
        now = time.monotonic()
        young = [t for t in live if t not in self._lean and now - self._begun[t] < self.preempt_within_s]
        for t in sorted(young, key=self._begun.__getitem__, reverse=True)[: max(0, uncovered)]:
            t.cancel()
            if not self._grant_dedicated(1):
                self._spawn(lean=True)

    def _spawn(self, lean: bool | None = None) -> None:
        # A start a caller waits for (more callers wait than workers start) imports nothing ahead: the code
        # imports what it uses, from the start cache as fast as a preload would (`lean_cfg`).
        if lean is None:
            lean = self.waiting > len(self._live_starts())
        t = asyncio.create_task(
            self._start_one(self.lean_cfg if lean else self.cfg), name="pool-start-worker"
        )
        self.starting.add(t)
        self._begun[t] = time.monotonic()
        if lean:
            self._lean.add(t)
        t.add_done_callback(self._forget_start)
        self._note_peak()

    def _note_peak(self) -> None:
        self.peak_starting = max(self.peak_starting, len(self._live_starts()) + self._dedicated)

    def _live_starts(self) -> list[asyncio.Task[None]]:
        """The starts in progress, not those stopped (only dying)."""
        return [t for t in self.starting if not t.cancelling()]

    def _forget_start(self, t: asyncio.Task[None]) -> None:
        self.starting.discard(t)
        self._lean.discard(t)
        self._begun.pop(t, None)
        self._grant_dedicated()  # a stopped or failed start's slot

    async def start_dedicated(self, cfg: WorkerConfig) -> WorkerProcess:
        """`start_worker(cfg)` for a caller that needs a worker of another configuration (a container's own
        memory cap), within the same `max_starting`: it waits for a free start slot, first come first served
        and ahead of the spares (a young spare's start gives its slot, as to a lean start)."""
        await self._dedicated_slot()
        try:
            return await self.start_worker(cfg)
        finally:
            self._dedicated -= 1
            self.replenish()  # its slot: to the next dedicated start waiting, or the spares

    async def _dedicated_slot(self) -> None:
        """Hold a start slot for a dedicated start (`_dedicated` counts it), waiting for one if none is free."""
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._dedicated_turns.append(turn)
        self._grant_dedicated()  # at once when a slot is free and nobody waits before it
        if not turn.done():
            self._preempt_spares()
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled() and turn.exception() is None:  # granted as it gave up
                self._dedicated -= 1
                self.replenish()  # the slot goes on
            elif not turn.done():
                turn.cancel()
                self._dedicated_turns.remove(turn)
            raise

    def _dedicated_waiting(self) -> int:
        return sum(1 for turn in self._dedicated_turns if not turn.done())

    def _grant_dedicated(self, slots: int | None = None) -> int:
        """Give free start slots (or `slots` more, one just freed by a stopped spare) to the dedicated starts
        waiting, first come first served; how many were given."""
        given = 0
        while self._dedicated_turns and (self._free_slots() > 0 if slots is None else given < slots):
            turn = self._dedicated_turns.popleft()
            if turn.done():
                continue
            self._dedicated += 1
            turn.set_result(None)
            given += 1
        if given:
            self._note_peak()
        return given

    async def start_worker(self, cfg: WorkerConfig) -> WorkerProcess:
        """Start one worker of `cfg` (not kept here). Raises `WorkerDied` with the reason, after logging it."""
        w = WorkerProcess(cfg)
        try:
            await w.start()
        except Exception as e:  # logged with its reason whatever it is (a task's error is otherwise lost)
            reason = str(e) or type(e).__name__
            self.start_errors = [*self.start_errors[-19:], reason]
            self.start_failures += 1
            log.error("sandbox worker failed to start: %s", reason)
            if isinstance(e, WorkerDied):
                raise
            raise WorkerDied(reason) from e
        self.started += 1
        if self._on_ready is not None:
            self._on_ready(w)
        if not w.data_limited and not self._said_no_data_limit:
            self._said_no_data_limit = True
            log.warning(
                "could not set RLIMIT_DATA on a sandbox worker (no permission, and no prlimit tool to run as "
                "its user); its memory is held by its cgroup, if any, and the watchdog"
            )
        return w

    async def _start_one(self, cfg: WorkerConfig) -> None:
        t0 = time.monotonic()
        try:
            w = await self.start_worker(cfg)
        except WorkerDied:
            return
        if self._on_started is not None:
            self._on_started(time.monotonic() - t0)
        # No longer "starting": else the replenish below counts this start twice and cancels another one
        # in progress (its caller then waits a whole start longer).
        self.starting.discard(asyncio.current_task())  # type: ignore[arg-type,unused-ignore]
        if self.closed:
            await w.kill()
            return
        self._hand_over(w)
        self.replenish()  # kills it again if its room went to a larger container meanwhile

    def _hand_over(self, w: WorkerProcess) -> None:
        """Give `w` to the longest waiting caller, or keep it idle when nobody waits."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(w)
                return
        self.idle.append(w)

    async def take(self, timeout_s: float) -> WorkerProcess:
        """A warm worker (waits for one being started; starts one if none is), first come first served.
        `TimeoutError` past timeout_s."""
        self.taking += 1
        try:
            return await self._take(timeout_s)
        finally:
            self.taking -= 1

    async def _take(self, timeout_s: float) -> WorkerProcess:
        self.idle = [w for w in self.idle if w.alive]
        if self.idle and not self.waiting:
            w = self.idle.pop(0)
            self.replenish()
            return w
        waiter: asyncio.Future[WorkerProcess] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    self.replenish()
                    if not self.starting:  # e.g. every start failed: try again
                        self._spawn()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1.0):  # also re-check after failed starts
                            await asyncio.shield(waiter)
                    if not waiter.done():
                        continue
                    w = waiter.result()
                    if w.alive:
                        return w
                    # it died before we woke: wait for another, still first in line
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.appendleft(waiter)
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # handed over as we gave up: pass it on
                self._hand_over(waiter.result())
            else:
                waiter.cancel()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def discard(self, w: WorkerProcess | None) -> None:
        """Kill a worker in the background."""
        if w is None:
            return
        t = asyncio.create_task(w.kill(), name="pool-kill-worker")
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    async def wait_started(self, timeout_s: float) -> None:
        """Wait until no worker is starting."""
        async with asyncio.timeout(timeout_s):
            while self.starting:
                await asyncio.wait(set(self.starting))

    async def aclose(self) -> None:
        """Stop starting workers and kill the idle ones (and those being killed)."""
        self.closed = True
        while self._dedicated_turns:
            turn = self._dedicated_turns.popleft()
            if not turn.done():
                turn.set_exception(WorkerDied("the pool is closing"))
        tasks = [*self.starting, *self._bg]
        for t in self.starting:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        idle, self.idle = self.idle, []
        await asyncio.gather(*(w.kill() for w in idle), return_exceptions=True)

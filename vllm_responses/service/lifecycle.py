"""The server's life once started: serving; draining on SIGTERM (`--shutdown-grace`); failing fast when the
engine dies (watched here); and the refusal new responses get once it is not serving.

Drain: new responses are refused (503), running ones may finish within the grace, the rest are ended
`failed` with a message saying why; then the runner is told to stop (exit status 0). Engine death: the
same, with a short wait, and exit status `ENGINE_DEAD_EXIT`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from vllm_responses.engine.base import Engine
from vllm_responses.protocol.errors import APIError, Unavailable
from vllm_responses.runs.run import Run
from vllm_responses.service.admission import Admission

__all__ = ["ENGINE_DEAD_EXIT", "EngineMonitor", "Lifecycle"]

logger = logging.getLogger(__name__)

# The exit status of a server whose engine died (0: a normal shutdown; 3: start-up failed).
ENGINE_DEAD_EXIT = 4
# How long responses get to end on their own once the engine died (they fail at their next engine call).
ENGINE_DEAD_SETTLE_S = 2.0
# After a response was told to end, how long its task gets to store it.
END_WAIT_S = 10.0


class EngineMonitor:
    """Watches the engine: `dead` checked every `check_s`, and a round trip (`ping`) every `ping_s`."""

    def __init__(self, engine: Engine, *, check_s: float = 0.5, ping_s: float = 5.0) -> None:
        self.engine = engine
        self.check_s = check_s
        self.ping_s = ping_s
        self.last_answer: float | None = None  # monotonic time of the last answered ping
        self.last_rtt_s: float | None = None
        self.pending_since: float | None = None  # a ping is out since then
        self.last_error: str | None = None
        self._ping: asyncio.Task[None] | None = None

    async def watch(self) -> str:
        """Return why the engine died, once it did."""
        next_ping = 0.0
        try:
            while True:
                reason = self.engine.dead
                if reason is not None:
                    return reason
                now = time.monotonic()
                if now >= next_ping and (self._ping is None or self._ping.done()):
                    self._ping = asyncio.create_task(self._one_ping(), name="engine ping")
                    next_ping = now + self.ping_s
                await asyncio.sleep(self.check_s)
        finally:
            if self._ping is not None:
                self._ping.cancel()

    async def _one_ping(self) -> None:
        self.pending_since = started = time.monotonic()
        try:
            await self.engine.ping()
        except Exception as exc:  # the watch loop notices a dead engine; a refusal is kept for /ready
            self.last_error = str(exc) or type(exc).__name__
        else:
            self.last_error = None
            self.last_answer = time.monotonic()
            self.last_rtt_s = self.last_answer - started
        finally:
            self.pending_since = None


class Lifecycle:
    """Serving, draining or failed; ends running responses and tells the runner to stop (`stop_server`).

    Parameters
    ----------
    grace_s: how long running responses may go on after SIGTERM before they are ended.
    stop_server: called once the server should exit (server.py sets uvicorn's `should_exit`).
    """

    def __init__(self, grace_s: float, stop_server: Callable[[], None] | None = None) -> None:
        self.grace_s = grace_s
        self.stop_server = stop_server
        self.state: Literal["starting", "serving", "draining", "failed"] = "starting"
        self.reason: str | None = None
        self.exit_code = 0
        self.monitor: EngineMonitor | None = None
        self._runs: dict[str, Run] = {}
        self._admission: Admission | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, runs: dict[str, Run], engine: Engine, admission: Admission | None = None) -> None:
        """Start serving: `runs` are the service's running responses; the engine is watched; `admission`'s
        queue is refused (503) once the server drains or fails."""
        self._runs = runs
        self._admission = admission
        self._loop = asyncio.get_running_loop()
        self.state = "serving"
        self.monitor = EngineMonitor(engine)
        self._spawn(self._watch(self.monitor), "engine watchdog")

    async def detach(self) -> None:
        """Stop watching (lifespan shutdown)."""
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def refusal(self) -> APIError | None:
        """The error a new response gets now, None while serving."""
        if self.state == "draining":
            return Unavailable(
                "The server is shutting down and takes no new responses; retry on another instance.",
                code="shutting_down",
            )
        dead = self.monitor.engine.dead if self.monitor is not None else None
        if self.state == "failed" or dead is not None:  # the watchdog may not have seen it yet
            return Unavailable(
                f"The server cannot serve: {self.reason or f'the engine died ({dead})'}; it is restarting.",
                code="engine_dead",
            )
        if self.state == "starting":
            return Unavailable("The server is starting.", code="starting")
        return None

    def request_shutdown(self) -> None:
        """SIGTERM: drain, then stop the server (idempotent; safe from a signal handler or another thread).
        Before start-up finished there is nothing to drain: the server is told to stop at once."""
        if self._loop is None:
            if self.stop_server is not None:
                self.stop_server()
            return
        self._loop.call_soon_threadsafe(self._begin_drain)

    def _begin_drain(self) -> None:
        if self.state != "serving":
            return
        self.state, self.reason = "draining", "shutting down"
        self._close_admission()
        logger.info(
            "shutdown requested: draining %d running response(s), grace %g s",
            len(self._running_runs()),
            self.grace_s,
        )
        self._spawn(self._drain(), "drain")

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        ended = await self._settle(
            self.grace_s,
            Unavailable(
                f"The server shut down before this response finished (shutdown grace {self.grace_s:g} s).",
                code="server_shutdown",
            ),
        )
        logger.info("drained: %d response(s) ended by the shutdown", ended)
        self._stop(0)

    async def _watch(self, monitor: EngineMonitor) -> None:
        reason = await monitor.watch()
        error = Unavailable(
            f"The engine died while this response was running ({reason}).", code="engine_dead"
        )
        if self.state == "draining":  # e.g. a Ctrl+C that reached the engine-core process too
            logger.warning("the engine stopped during the drain (%s): ending running responses", reason)
            for run in self._running_runs():
                run.end(error)
            return  # the drain goes on and stops the server with status 0
        self.state, self.reason = "failed", f"the engine died ({reason})"
        self._close_admission()
        logger.critical(
            "the engine died (%s): failing running responses and exiting with status %d",
            reason,
            ENGINE_DEAD_EXIT,
        )
        await self._settle(ENGINE_DEAD_SETTLE_S, error)
        self._stop(ENGINE_DEAD_EXIT)

    def _close_admission(self) -> None:
        """Requests waiting for a slot get the refusal new requests get (they were never started)."""
        error = self.refusal()
        if self._admission is not None and error is not None:
            self._admission.close(error)

    def _running_runs(self) -> list[Run]:
        return [r for r in list(self._runs.values()) if r.task is not None and not r.task.done()]

    async def _settle(self, wait_s: float, error: APIError) -> int:
        """Wait up to `wait_s` for running responses to end, end the rest with `error`; how many were ended."""
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0 and (running := self._running_runs()):
            # re-read every second: a response may start meanwhile (on an open WebSocket)
            await asyncio.wait({r.task for r in running if r.task is not None}, timeout=min(left, 1.0))
        runs = self._running_runs()
        for run in runs:
            run.end(error)
        if runs:
            await asyncio.wait({r.task for r in runs if r.task is not None}, timeout=END_WAIT_S)
        return len(runs)

    def _stop(self, code: int) -> None:
        self.exit_code = code
        if self.stop_server is not None:
            self.stop_server()

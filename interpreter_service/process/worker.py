"""One sandboxed Deno + Pyodide worker process, driven over a line-delimited JSON protocol."""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import time
from typing import cast

from interpreter_service.api import ErrorKind, ExecutionResult, InterpreterError
from interpreter_service.process.confine import WorkerGroup
from interpreter_service.process.launch import (
    WORKER_ENV,
    WorkerConfig,
    deno_command,
    limit_data,
)
from interpreter_service.process.procfs import proc_status
from interpreter_service.process.spawn import spawn_setup
from interpreter_service.process.worker_protocol import (
    AnyReply,
    ExecReply,
    ExecRequest,
    Op,
    ReadyEvent,
    Request,
)

__all__ = [
    "WorkerDied",
    "WorkerProcess",
]

STREAM_LIMIT = 64 * 1024 * 1024
TRUNCATION_MARKER = "\n[... output truncated: {n} more bytes not shown ...]\n"
INTERRUPT_RESEND_S = 0.25  # while a timed-out call has not answered, re-send the interrupt this often
STDERR_NOTE = 600  # characters of a worker's stderr quoted in an error
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Deno colours its error messages


class WorkerDied(InterpreterError):
    """The Deno process exited (crash, kill, JS heap limit) or broke the protocol."""


class WorkerProcess:
    """A Deno process running Pyodide. Not shared: one owner at a time; calls are serialized by the owner."""

    def __init__(self, cfg: WorkerConfig) -> None:
        self.cfg = cfg
        self.proc: asyncio.subprocess.Process | None = None
        self.ready_s = 0.0
        self.phases: dict[str, int] = {}  # when each start phase ended, ms since the process started
        self.start_notes: dict[str, object] = {}  # what the start did (e.g. mpl_docs_replayed/_recorded)
        self.poisoned = False  # must be replaced (memory error, timed-out kill)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[AnyReply]] = {}
        self._stderr: collections.deque[str] = collections.deque(maxlen=50)
        self._ready: asyncio.Future[ReadyEvent] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr_task: asyncio.Task[None] | None = None
        self._exit_reason: str | None = None
        self.kill_reason: str | None = None  # why the pool's limits killed it (said when it is reported dead)
        self.group: WorkerGroup | None = None  # its cgroup(s), when the host gives us one
        self.data_limited = False  # whether its RLIMIT_DATA could be set
        # Its resident memory as last read from /proc: when it became ready, then at each watchdog round.
        self.last_rss = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self._exit_reason is None

    def rss_bytes(self) -> int | None:
        return proc_status(self.pid).rss_bytes or None

    @property
    def exit_reason(self) -> str:
        """Why it is not running (empty while it is)."""
        return self._exit_reason or ("" if self.alive else "it is not running")

    @property
    def busy(self) -> bool:
        """Whether a request is in flight (a call may use CPU now)."""
        return bool(self._pending)

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    async def start(self) -> None:
        """Start the process and wait until it is warm. Raises `WorkerDied` saying why it did not start
        (the exit code and the end of its stderr, or that it did not become ready in time)."""
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        self._ready = loop.create_future()
        cmd = deno_command(self.cfg)
        user = self.cfg.user
        try:
            self.group = self.cfg.confiner.group(self.cfg.limits())
        except OSError as e:
            raise WorkerDied(f"could not make the worker's cgroup ({self.cfg.confiner.name}): {e}") from e
        spawn = spawn_setup(user, tuple(self.group.procs_files) if self.group else (), WORKER_ENV)
        try:
            # said here: behind `sh` and `setpriv` a missing binary would only be an exit code
            if not os.access(cmd[0], os.X_OK):
                raise FileNotFoundError(f"no executable file {cmd[0]}")
            self.proc = await asyncio.create_subprocess_exec(
                *spawn.prefix,
                *cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(WORKER_ENV),
                cwd=str(self.cfg.cwd or "/"),
                limit=STREAM_LIMIT,
                start_new_session=True,  # a Ctrl-C of the parent does not hit workers mid-call
                preexec_fn=spawn.preexec_fn,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            self._drop_group()
            who = f" as user {user.name!r}" if user else ""
            raise WorkerDied(f"could not run {cmd[0]}{who}: {e}") from e
        self._stderr_task = asyncio.create_task(self._read_stderr(), name=f"worker-{self.pid}-err")
        self._tasks = [
            asyncio.create_task(self._read_stdout(), name=f"worker-{self.pid}-out"),
            self._stderr_task,
        ]
        try:
            async with asyncio.timeout(self.cfg.start_timeout_s):
                ready = await self._ready
        except TimeoutError:
            await self.kill()
            raise WorkerDied(
                f"worker did not become ready within {self.cfg.start_timeout_s:g} s{self._stderr_note()}"
            ) from None
        except BaseException:
            await self.kill()
            raise
        self.ready_s = time.monotonic() - t0
        phases = ready.get("phases")
        if isinstance(phases, dict):
            self.phases = {str(k): int(v) for k, v in phases.items() if isinstance(v, int | float)}
        notes = ready.get("notes")
        if isinstance(notes, dict):
            self.start_notes = {str(k): v for k, v in notes.items()}
        held = proc_status(self.pid)
        self.last_rss = held.rss_bytes
        try:
            self.data_limited = await self._limit_data(held.data_bytes)
        except BaseException:  # cancelled while its limit was being set: it must not outlive its owner
            await self.kill()
            raise

    async def _limit_data(self, held: int) -> bool:
        """Cap what the process may map writable (RLIMIT_DATA) at what it holds now (`held`, its VmData) plus
        its heaps' caps: off-heap buffers and extra WebAssembly memories then fail to allocate, on any host.
        Whether it was set (the pool says so once if not)."""
        if self.pid is None or not held:
            return False
        return await limit_data(self.pid, held + self.cfg.cost, self.cfg.user)

    def _drop_group(self) -> None:
        if self.group is not None:
            self.group.remove()

    def _stderr_note(self) -> str:
        tail = self.stderr_tail()[-STDERR_NOTE:]
        return f"; its stderr ended with: {tail}" if tail else "; it wrote nothing to stderr"

    async def _read_stdout(self) -> None:
        assert self.proc and self.proc.stdout
        reason = "stdout closed"
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue  # not ours (user code wrote to stdout)
                if not isinstance(msg, dict):
                    continue
                if "event" in msg and self._ready and not self._ready.done():
                    if msg["event"] == "ready":
                        self._ready.set_result(cast(ReadyEvent, msg))
                    else:
                        error = str(msg.get("error") or "no reason given")[-STDERR_NOTE:]
                        self._ready.set_exception(WorkerDied(f"worker failed to start: {error}"))
                    continue
                rid = msg.get("id")
                fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if fut is not None and not fut.done():
                    fut.set_result(cast(AnyReply, msg))
        except (ValueError, asyncio.LimitOverrunError) as e:  # a line over STREAM_LIMIT
            reason = f"protocol error: {e}"
        finally:
            await self._on_exit(reason)

    async def _read_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        with contextlib.suppress(ValueError, asyncio.LimitOverrunError):
            while line := await self.proc.stderr.readline():
                self._stderr.append(ANSI_ESCAPE.sub("", line.decode(errors="replace")).rstrip()[:500])

    async def _on_exit(self, reason: str) -> None:
        assert self.proc
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await self.proc.wait()
                if self._stderr_task is not None:  # its last lines say why it exited
                    await asyncio.wait({self._stderr_task})
        code = self.proc.returncode
        self._exit_reason = f"worker exited ({reason}, exit code {code}){self._why_killed()}"
        err = WorkerDied(self._exit_reason + self._stderr_note())
        if self._ready and not self._ready.done():
            self._ready.set_exception(err)
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
                # A caller that timed out has stopped awaiting this future; reading the exception here
                # keeps asyncio from logging "exception was never retrieved". An awaiter still gets it.
                fut.exception()
        self._pending.clear()
        self._drop_group()

    def _why_killed(self) -> str:
        """What ended it, when it was our limits: the pool's watchdog, or the kernel for its memory."""
        if self.kill_reason:
            return f"; killed by the sandbox's limits: {self.kill_reason}"
        if self.group is not None and self.group.oom_killed():
            limit = self.cfg.limits().memory_bytes >> 20
            return f"; killed by the kernel: the worker's memory limit ({limit} MiB, all of its memory) was reached"
        return ""

    def _send(self, message: Request) -> asyncio.Future[AnyReply]:
        """Write one request (its `id` from `_ids`); the future gets its reply."""
        if not self.alive or self.proc is None or self.proc.stdin is None:
            raise WorkerDied(self._exit_reason or "worker is not running")
        fut: asyncio.Future[AnyReply] = asyncio.get_running_loop().create_future()
        self._pending[message["id"]] = fut
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        return fut

    async def request(self, op: Op, *, timeout_s: float = 30.0, **fields: object) -> AnyReply:
        """Send one request (`op` and its fields: worker_protocol's request types); returns the reply (the
        op's reply type). Raises `WorkerDied` or `InterpreterError` (the reply's error)."""
        fut = self._send(cast(Request, {"op": op, "id": next(self._ids), **fields}))
        try:
            async with asyncio.timeout(timeout_s):
                assert self.proc is not None and self.proc.stdin is not None
                try:
                    await self.proc.stdin.drain()  # large file payloads
                except (ConnectionError, RuntimeError) as e:
                    raise WorkerDied(f"worker stdin closed: {e!r}") from e
                reply = await fut
        except TimeoutError:
            raise InterpreterError(f"worker did not answer {op!r} within {timeout_s} s") from None
        if not reply.get("ok"):
            raise InterpreterError(str(reply.get("error", "worker error")))
        return reply

    def interrupt(self) -> None:
        if self.alive and self.proc and self.proc.stdin:
            with contextlib.suppress(OSError, RuntimeError):
                self.proc.stdin.write(b'{"op":"interrupt"}\n')

    async def execute(self, code: str, *, timeout_s: float, max_output: int | None = None) -> ExecutionResult:
        """Run code; timeouts interrupt, then kill after the grace period. Never raises for code errors."""
        cap = self.cfg.max_output if max_output is None else max_output
        t0 = time.monotonic()
        try:
            fut = self._send(ExecRequest(op="exec", id=next(self._ids), code=code, max_output=cap))
        except WorkerDied as e:
            return _died(str(e), t0)
        timed_out = False
        reply: AnyReply | None
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    reply = await asyncio.shield(fut)
            except TimeoutError:
                timed_out = True
                reply = await self._interrupt_and_wait(fut)
        except asyncio.CancelledError:
            await self._interrupt_and_wait(fut)
            raise
        except WorkerDied as e:
            return _died(str(e), t0)
        if reply is None:  # did not yield to the interrupt: killed
            return ExecutionResult(
                logs="",
                error=f"timed out after {timeout_s:g} s (worker did not yield; killed)",
                error_kind="timeout",
                duration_s=time.monotonic() - t0,
                worker_restarted=True,
            )
        return self._to_result(cast(ExecReply, reply), cap, t0, timeout_s if timed_out else None)

    async def _interrupt_and_wait(self, fut: asyncio.Future[AnyReply]) -> AnyReply | None:
        """Interrupt the running call; wait the grace period, else kill. Returns the reply if any."""
        # Re-sent until answered: one that lands before the code starts (while its imports load) is
        # cleared with the flag, and code may swallow a KeyboardInterrupt; a later one still gets through.
        deadline = time.monotonic() + self.cfg.grace_s
        try:
            while not fut.done() and (left := deadline - time.monotonic()) > 0:
                self.interrupt()
                await asyncio.wait({fut}, timeout=min(INTERRUPT_RESEND_S, left))
        except asyncio.CancelledError:
            await self.kill()
            raise
        if fut.done() and fut.exception() is None:
            return fut.result()
        self.poisoned = True
        await self.kill()
        return None

    def _to_result(self, r: ExecReply, cap: int, t0: float, timed_out_after: float | None) -> ExecutionResult:
        """The cell's result from its reply (an `ErrorReply` when the worker could not run the cell: then
        only `error` is there, hence `get`)."""
        logs = r.get("logs", "")
        dropped = int(r.get("dropped", 0)) + int(r.get("clipped", 0))
        for msg in r.get("load_errors") or []:
            logs += f"[package loading] {msg}\n"
        if (value := r.get("value")) is not None:
            logs += value + "\n"
        if traceback := r.get("traceback"):
            logs += traceback
        if len(logs) > cap:
            dropped += len(logs) - cap
            logs = logs[:cap]
        if dropped:
            logs += TRUNCATION_MARKER.format(n=dropped)
        images = tuple(base64.b64decode(s) for s in r.get("images") or ())
        etype, error = r.get("error_type"), r.get("error")
        kind: ErrorKind | None = None
        if etype in ("KeyboardInterrupt", "CancelledError") and timed_out_after is not None:
            error, kind = f"timed out after {timed_out_after:g} s (interrupted)", "timeout"
        elif etype == "MemoryError":
            kind, self.poisoned = "memory", True  # wasm memory never shrinks: recycle
            error = f"MemoryError: the worker's memory limit ({self.cfg.memory_limit >> 20} MiB) was reached"
        elif error is not None:
            kind = "exception"
        return ExecutionResult(
            logs=logs,
            images=images,
            error=error,
            error_kind=kind,
            duration_s=time.monotonic() - t0,
            worker_restarted=kind == "memory",
            files_changed=tuple(r.get("files_changed") or ()),
        )

    async def kill(self) -> None:
        """Kill the process (SIGKILL) and reap it. Safe to call twice."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # its own session: the group is it and any child
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.proc.wait()
        for t in self._tasks:
            if not t.done():
                t.cancel()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(2):
                await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._exit_reason is None:
            self._exit_reason = "worker was killed" + self._why_killed()
        for fut in self._pending.values():  # a call in flight learns why (its reader was cancelled)
            if not fut.done():
                fut.set_exception(WorkerDied(self._exit_reason))
                fut.exception()
        self._pending.clear()
        self._drop_group()

    async def kill_for(self, reason: str) -> None:
        """Kill it for passing a limit; the reason is given with its death to whoever asks next."""
        self.kill_reason = self.kill_reason or reason
        self.poisoned = True
        await self.kill()


def _died(msg: str, t0: float) -> ExecutionResult:
    return ExecutionResult(
        logs="",
        error=f"the worker crashed: {msg}",
        error_kind="crashed",
        duration_s=time.monotonic() - t0,
        worker_restarted=True,
    )

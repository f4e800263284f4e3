"""`ExtractionPool`: PDFs and office documents (DOCX, PPTX) read as text in a few worker processes of their own
(context/extract_worker.py), under CPU, memory and wall-clock limits, so that no document can hold the server's
CPU or threads.

Workers start on first use, at most `size` at once; a job waits for an idle one (FIFO). A job past its wall
clock, or one whose caller goes away (its task cancelled: the client left), has its worker killed; a worker
that dies (past its CPU or memory) is not reused. A killed or dead worker is replaced by the next job that
needs one. `busy`, `idle`, `waiting`, `started_total` and `killed_total` say how the pool stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any

from vllm_responses.context.extract_worker import HEADER
from vllm_responses.context.file_text import FileLimits, Unreadable
from vllm_responses.context.pdf_budget import PdfBudget

__all__ = ["ExtractionLimits", "ExtractionPool"]


@dataclass(frozen=True)
class ExtractionLimits:
    """One job's limits: CPU seconds, wall-clock seconds, and a worker's address space in bytes."""

    cpu_s: float
    timeout_s: float
    memory_bytes: int


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, header: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        """The worker's answer to one job; None when it died first."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        body = json.dumps({**header, "size": len(data)}).encode()
        try:
            self.proc.stdin.write(HEADER.pack(len(body)) + body + data)
            await self.proc.stdin.drain()
            size = HEADER.unpack(await self.proc.stdout.readexactly(HEADER.size))[0]
            answer: dict[str, Any] = json.loads(await self.proc.stdout.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError):
            return None
        return answer

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


class ExtractionPool:
    """Up to `size` extraction workers (see the module docstring)."""

    def __init__(self, size: int, limits: ExtractionLimits) -> None:
        self.size = size
        self.limits = limits
        self.busy = 0
        self.started_total = 0
        self.killed_total = 0
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()  # every worker started and not killed yet
        self._reaping: set[asyncio.Future[int]] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def workers(self) -> list[int]:
        """The process ids of the workers alive (busy or idle)."""
        return sorted(w.proc.pid for w in self._live)

    async def extract(
        self, data: bytes, filename: str, media_type: str | None, limits: FileLimits, budget: PdfBudget
    ) -> str:
        """The file's text (context/file_text.py), a PDF's pages charged to `budget`; `Unreadable` for one that
        cannot be read, is past the budget, or is past the job's CPU, memory or time."""
        return "\n".join(await self.extract_parts(data, filename, media_type, limits, budget))

    async def extract_parts(
        self, data: bytes, filename: str, media_type: str | None, limits: FileLimits, budget: PdfBudget
    ) -> list[str]:
        """`extract`'s text in its parts (a PDF's pages, a PPTX's slides, else one)."""
        header = {
            "filename": filename,
            "media_type": media_type,
            "max_pages": limits.max_pages,
            "max_chars": limits.max_chars,
            "pages_left": budget.pages,
            "content_bytes_left": budget.content_bytes,
            "cpu_s": self.limits.cpu_s,
        }
        answer = await self._run(header, data, filename)
        if "error" in answer:
            raise Unreadable(str(answer["error"]))
        budget.charge(int(answer["pages"]), int(answer["content_bytes"]))
        return [str(part) for part in answer["parts"]]

    async def _run(self, header: dict[str, Any], data: bytes, filename: str) -> dict[str, Any]:
        """One job on a worker of the pool: its answer, the worker given back (or killed)."""
        worker = await self._take()
        answer: dict[str, Any] | None = None
        try:
            async with asyncio.timeout(self.limits.timeout_s):
                answer = await worker.ask(header, data)
        except TimeoutError:
            raise Unreadable(
                f"The file {filename!r} took longer than {self.limits.timeout_s:g} s to read "
                "(--input-file-extract-timeout)."
            ) from None
        finally:
            self._give_back(worker, answer)
        if answer is None:  # ended by the kernel: past its CPU time or its memory
            raise Unreadable(
                f"The file {filename!r} needs more than this server gives one file to read "
                f"({self.limits.cpu_s:g} s of CPU, --input-file-extract-cpu; "
                f"{self.limits.memory_bytes} bytes of memory, --input-file-extract-memory)."
            )
        if answer.get("error") == "memory":
            answer["error"] = (
                f"The file {filename!r} needs more memory to read than this server gives one file "
                f"({self.limits.memory_bytes} bytes, --input-file-extract-memory)."
            )
        return answer

    async def _take(self) -> _Worker:
        """An idle worker, a new one while fewer than `size` run, or the next one given back (FIFO)."""
        if self._closed:
            raise RuntimeError("the extraction pool is closed")
        if self.busy >= self.size or self._waiters:
            turn = asyncio.get_running_loop().create_future()
            self._waiters.append(turn)
            try:
                await turn
            except BaseException:
                if not turn.done() or turn.cancelled():
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(turn)
                else:  # a turn handed to a caller that left goes to the next one
                    self.busy -= 1
                    self._pass_turn()
                raise
        else:
            self.busy += 1
        if self._idle:
            return self._idle.pop()
        try:
            return await self._start()
        except BaseException:
            self.busy -= 1
            self._pass_turn()
            raise

    async def _start(self) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vllm_responses.context.extract_worker",
            str(self.limits.memory_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self.started_total += 1
        worker = _Worker(proc)
        self._live.add(worker)
        return worker

    def _give_back(self, worker: _Worker, answer: dict[str, Any] | None) -> None:
        """A worker back to the pool when it answered and lives; killed otherwise. Its place goes on."""
        if answer is None or answer.get("error") == "memory" or self._closed:
            self._kill(worker)
        else:
            self._idle.append(worker)
        self.busy -= 1
        self._pass_turn()

    def _pass_turn(self) -> None:
        """The place freed goes to the first caller waiting (it counts as busy from now)."""
        while self._waiters and self.busy < self.size:
            turn = self._waiters.popleft()
            if not turn.done():
                self.busy += 1
                turn.set_result(None)

    def _kill(self, worker: _Worker) -> None:
        """End `worker` now; it is reaped in the background."""
        worker.kill()
        self._live.discard(worker)
        self.killed_total += 1
        reaped = asyncio.ensure_future(worker.proc.wait())
        self._reaping.add(reaped)
        reaped.add_done_callback(self._reaping.discard)

    async def aclose(self) -> None:
        """Kill every worker, busy ones too (server shutdown); later jobs are refused."""
        self._closed = True
        for worker in list(self._live):
            self._kill(worker)
        self._idle.clear()
        await asyncio.gather(*self._reaping, return_exceptions=True)

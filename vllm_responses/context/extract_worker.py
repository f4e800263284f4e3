"""One extraction worker process (`python -m vllm_responses.context.extract_worker`): reads PDFs' and office
documents' text for the server, one job at a time, under the limits the server gives it.

It caps its own address space (`RLIMIT_AS`) once at start and, before each job, its CPU time to what it has
used plus the job's allowance (`RLIMIT_CPU`: past it the kernel ends the process). A job is a frame on stdin,
its answer a frame on stdout (`frames`: a 4-byte length and a JSON header, then the job's file bytes). The
answer is `{"parts", "pages", "content_bytes"}` (the text in its parts, context/file_text.py) (what it charged to the budget it was given) or `{"error"}`.
"""

from __future__ import annotations

import json
import logging
import resource
import struct
import sys
from typing import Any, BinaryIO

from vllm_responses.context.file_text import FileLimits, Unreadable, read_file_parts
from vllm_responses.context.pdf_budget import PdfBudget

__all__ = ["HEADER", "main", "read_frame", "write_frame"]

HEADER = struct.Struct(">I")


def write_frame(out: BinaryIO, header: dict[str, Any], data: bytes = b"") -> None:
    """`header` (JSON, with the size of `data`) and then `data`, written and flushed."""
    body = json.dumps({**header, "size": len(data)}).encode()
    out.write(HEADER.pack(len(body)) + body + data)
    out.flush()


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """The next frame's header and data; None at the end of the stream."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    header = json.loads(stream.read(HEADER.unpack(head)[0]))
    return header, stream.read(int(header["size"]))


def _job(header: dict[str, Any], data: bytes) -> dict[str, Any]:
    """One file's text, or the error the client is shown."""
    limits = FileLimits(len(data), int(header["max_pages"]), int(header["max_chars"]))
    budget = PdfBudget(int(header["pages_left"]), int(header["content_bytes_left"]))
    start = PdfBudget(budget.pages, budget.content_bytes)
    try:
        parts = read_file_parts(data, str(header["filename"]), header.get("media_type"), limits, budget)
    except Unreadable as exc:
        return {"error": str(exc)}
    except MemoryError:
        return {"error": "memory"}
    pages, content = start.pages - budget.pages, start.content_bytes - budget.content_bytes
    return {"parts": parts, "pages": pages, "content_bytes": content}


def _allow_cpu(seconds: float) -> None:
    """Let this process use `seconds` more CPU time from now (the kernel ends it past that)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = int(used + seconds) + 1
    resource.setrlimit(
        resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard)
    )


def main() -> None:
    """Serve jobs from stdin until it closes. argv[1]: the address-space limit in bytes (0: none)."""
    memory = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    import defusedxml.ElementTree  # noqa: F401  (loaded before the limits and the first job)
    import pypdf  # noqa: F401

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a broken file's warnings are not the server's

    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (frame := read_frame(stdin)) is not None:
        header, data = frame
        _allow_cpu(float(header["cpu_s"]))
        answer = _job(header, data)
        write_frame(stdout, answer)
        if answer.get("error") == "memory":
            return  # the heap may be in any state: the pool starts a fresh worker


if __name__ == "__main__":
    main()

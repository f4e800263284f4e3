"""What /proc says of one process: resident and writable memory, threads, CPU time (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcStatus", "proc_status", "thread_cpu"]

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStatus:
    """Zeros when the process is gone (or /proc is not there)."""

    rss_bytes: int = 0
    data_bytes: int = 0  # private writable mappings (what RLIMIT_DATA counts)
    tasks: int = 0  # threads
    cpu_s: float = 0.0  # user + system time so far


def proc_status(pid: int | None) -> ProcStatus:
    if pid is None:
        return ProcStatus()
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return ProcStatus()
    return ProcStatus(
        rss_bytes=_kib(fields, "VmRSS"),
        data_bytes=_kib(fields, "VmData"),
        tasks=int(fields.get("Threads", "0").strip() or 0),
        cpu_s=(int(stat[11]) + int(stat[12])) / _TICK,
    )


def thread_cpu(pid: int | None) -> dict[str, float]:
    """CPU time (user + system, s) of a process's threads by thread name (threads of one name summed); empty
    when the process is gone."""
    out: dict[str, float] = {}
    if pid is None:
        return out
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:  # "tid (name) state ...": the name as /comm has it, which may itself hold ")"
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended
        head, _, rest = text.rpartition(")")
        name, stat = head.partition("(")[2], rest.split()
        out[name] = out.get(name, 0.0) + (int(stat[11]) + int(stat[12])) / _TICK
    return out


def _kib(fields: dict[str, str], key: str) -> int:
    return int(fields.get(key, "0 kB").split()[0]) << 10

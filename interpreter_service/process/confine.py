"""Limits the operating system holds each worker to: a cgroup per worker (v2 or v1) where the host allows one.

WebAssembly's and V8's own caps bound the Python heap and the JS heap only; sandboxed code reaches the JS
runtime (`import js`) and can allocate off-heap buffers and start threads. The kernel bounds all of it:

- **cgroup v2** (`memory.max`, `memory.swap.max`, `pids.max`, `cpu.max`) in a group of our own under the
  server's cgroup, when its controllers can be enabled there (a delegated subtree, or root);
- **cgroup v1** (`memory.limit_in_bytes` and `memory.memsw.limit_in_bytes`, `pids.max`,
  `cpu.cfs_quota_us`) under the server's own groups of those controllers, when they are writable;
- otherwise none, and the pool's watchdog (`interpreter_service.pool.watchdog`) and RLIMITs stand in.

`detect(mode)` picks the strongest one available ("auto"), or the one asked for (an error if it is not).
Each worker gets its own group (`WorkerGroup`): its pid is written to the group's `cgroup.procs` by the
child before exec, and the group is removed when the worker has exited.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from interpreter_service.api import InterpreterError

__all__ = ["CGROUP_ROOT", "Confiner", "Limits", "WorkerGroup", "detect", "sweep_stale", "write_control"]

log = logging.getLogger("interpreter_service.pool")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
_V1 = ("memory", "pids", "cpu")
MODES = ("auto", "cgroup", "none")


@dataclass(frozen=True)
class Limits:
    """What one worker may use: all its memory (bytes), its tasks (threads and processes), CPU cores."""

    memory_bytes: int
    tasks: int
    cpus: float


@dataclass
class WorkerGroup:
    """One worker's cgroup(s): the `cgroup.procs` files its child joins, and what the kernel recorded."""

    dirs: list[Path]
    procs_files: list[str]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a task of this group for its memory limit."""
        for d in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError, ValueError):
                    for line in (d / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value) > 0:
                            return True
        return False

    def remove(self) -> None:
        """Remove the group's directories (they must be empty: the worker has exited)."""
        for d in self.dirs:
            with contextlib.suppress(OSError):
                d.rmdir()


class Confiner:
    """Makes a cgroup per worker under the pool's own group(s); `name` says which mechanism."""

    name = "none"

    def group(self, limits: Limits) -> WorkerGroup | None:
        return None

    def close(self) -> None:
        """Remove the pool's own group(s) (after every worker's)."""


def sweep_stale(parent: Path) -> None:
    """Remove the empty groups that pools of processes now gone left under `parent` (a server killed before
    its pool closed): `vr-sandbox-<pid>-*` whose pid is not running, with their workers' groups."""
    for base in parent.glob("vr-sandbox-*-*"):
        try:
            pid = int(base.name.split("-")[2])
            os.kill(pid, 0)
            continue  # its server still runs
        except (ValueError, IndexError, PermissionError):
            continue
        except ProcessLookupError:
            pass
        with contextlib.suppress(OSError):
            for worker in base.glob("w-*"):
                worker.rmdir()
            base.rmdir()


class CgroupV2(Confiner):
    name = "cgroup2"

    def __init__(self, parent: Path) -> None:
        sweep_stale(parent)
        self.base = parent / f"vr-sandbox-{os.getpid()}-{secrets.token_hex(3)}"
        self.base.mkdir()
        try:
            _enable_controllers(parent)
            write_control(self.base / "cgroup.subtree_control", "+memory +pids +cpu")
        except OSError:
            with contextlib.suppress(OSError):
                self.base.rmdir()
            raise

    def group(self, limits: Limits) -> WorkerGroup:
        d = self.base / f"w-{secrets.token_hex(4)}"
        d.mkdir()
        try:
            write_control(d / "memory.max", str(limits.memory_bytes))
            with contextlib.suppress(OSError):  # absent without swap accounting
                write_control(d / "memory.swap.max", "0")
            write_control(d / "pids.max", str(limits.tasks))
            write_control(d / "cpu.max", f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
        except OSError:
            WorkerGroup([d], []).remove()
            raise
        return WorkerGroup([d], [str(d / "cgroup.procs")])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.base.rmdir()


class CgroupV1(Confiner):
    name = "cgroup1"

    def __init__(self, parents: dict[str, Path]) -> None:
        tag = f"vr-sandbox-{os.getpid()}-{secrets.token_hex(3)}"
        self.bases: dict[str, Path] = {}
        for parent in parents.values():
            sweep_stale(parent)
        try:
            for controller, parent in parents.items():
                (parent / tag).mkdir()
                self.bases[controller] = parent / tag
        except OSError:
            self.close()
            raise

    def group(self, limits: Limits) -> WorkerGroup:
        name = f"w-{secrets.token_hex(4)}"
        dirs = [base / name for base in self.bases.values()]
        wg = WorkerGroup(dirs, [str(d / "cgroup.procs") for d in dirs])
        try:
            for d in dirs:
                d.mkdir()
            memory, pids, cpu = (self.bases[c] / name for c in _V1)
            write_control(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
            if (memory / "memory.memsw.limit_in_bytes").exists():  # memory and swap together
                write_control(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
            write_control(pids / "pids.max", str(limits.tasks))
            write_control(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            write_control(cpu / "cpu.cfs_quota_us", str(int(limits.cpus * CPU_PERIOD_US)))
        except OSError:
            wg.remove()
            raise
        return wg

    def close(self) -> None:
        for base in self.bases.values():
            with contextlib.suppress(OSError):
                base.rmdir()


def _enable_controllers(parent: Path) -> None:
    """Enable memory, pids and cpu for `parent`'s children. A cgroup v2 group with processes of its own cannot
    (the "no internal processes" rule): then its processes (the server's) move to a leaf `vr-server` first."""
    try:
        write_control(parent / "cgroup.subtree_control", "+memory +pids +cpu")
        return
    except OSError as e:
        if e.errno != errno.EBUSY:
            raise
    leaf = parent / "vr-server"
    leaf.mkdir(exist_ok=True)
    for pid in (parent / "cgroup.procs").read_text().split():
        with contextlib.suppress(ProcessLookupError):
            write_control(leaf / "cgroup.procs", pid)
    write_control(parent / "cgroup.subtree_control", "+memory +pids +cpu")


def write_control(path: Path | str, text: str) -> None:
    """Write one cgroup control file (a plain open/write/close: also safe in a child before exec)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _own_groups(root: Path) -> tuple[Path | None, dict[str, Path]]:
    """The server's cgroup v2 folder (when the hierarchy at `root` is v2) and its v1 folders by controller."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            rel = path.lstrip("/")
            if not controllers and (root / "cgroup.controllers").exists():
                v2 = root / rel
            for c in controllers.split(","):
                if c in _V1 and (root / c / "tasks").exists():
                    v1[c] = root / c / rel
    return v2, v1


def _try_v2(parent: Path | None) -> Confiner | None:
    if parent is None:
        return None
    try:
        have = set((parent / "cgroup.controllers").read_text().split())
        if not {"memory", "pids", "cpu"} <= have:
            return None
        return CgroupV2(parent)
    except OSError as e:
        log.debug("cgroup v2 not usable at %s: %s", parent, e)
        return None


def _try_v1(parents: dict[str, Path]) -> Confiner | None:
    if set(parents) != set(_V1):
        return None
    try:
        return CgroupV1({c: parents[c] for c in _V1})
    except OSError as e:
        log.debug("cgroup v1 not usable at %s: %s", parents, e)
        return None


def detect(mode: str = "auto", root: Path = CGROUP_ROOT) -> Confiner:
    """The strongest mechanism this host lets us use ("auto"), a cgroup or an error ("cgroup"), or none."""
    if mode not in MODES:
        raise InterpreterError(f"unknown sandbox isolation mode {mode!r} (one of {', '.join(MODES)})")
    if mode == "none":
        return Confiner()
    v2, v1 = _own_groups(root)
    found = _try_v2(v2) or _try_v1(v1)
    if found is not None:
        return found
    if mode == "cgroup":
        raise InterpreterError(
            "no usable cgroup for the sandbox workers (cgroup v2 with memory, pids and cpu delegated to this "
            "process, or writable cgroup v1 memory, pids and cpu hierarchies); run as root or in a delegated "
            "cgroup, or choose isolation 'auto'"
        )
    return Confiner()

"""How a worker process is launched: its settings, its Deno command line, its OS limits (RLIMIT_DATA)."""

from __future__ import annotations

import asyncio
import re
import resource
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interpreter_service.api import DATA_DIR
from interpreter_service.process.confine import Confiner, Limits
from interpreter_service.process.sandbox_dir import WorkerUser
from interpreter_service.process.spawn import spawn_setup

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_PRELOAD",
    "RUNTIME_MEMORY",
    "WORKER_SCRIPT",
    "WorkerConfig",
    "codegen_flags",
    "deno_command",
    "find_deno",
    "heaps_cost",
    "limit_data",
]

WORKER_SCRIPT = Path(__file__).resolve().parents[1] / "runtime" / "worker.mjs"
WASM_PAGE = 65536
DEFAULT_PRELOAD = ("numpy", "matplotlib")  # what a worker imports before it is ready
DEFAULT_MEMORY_LIMIT = 1 << 30  # a worker's WebAssembly heap cap unless asked otherwise ('1g')
# A worker's whole environment: nothing of the server's, only glibc's malloc threshold for mmap fixed at its
# default (128 KiB). Left alone, glibc raises it to the size of the largest buffer freed so far (the 10 MB
# wasm binary, the 6.4 MB standard library zip, at the start), after which V8's buffers of up to that size
# come from the heap, which does not give pages back. Fixed, a worker holds less resident memory and gives
# cells' garbage back, for a slightly longer start (more mmap and munmap calls; docs/sandbox.md, "Memory").
# Sandboxed code cannot read it (no --allow-env).
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}
RUNTIME_MEMORY = 256 << 20  # a worker's memory outside its two heaps' caps: Deno's code, V8's other spaces


def find_deno() -> str:
    import deno  # type: ignore[import-untyped]  # PyPI `deno` ships no type information

    return str(deno.find_deno_bin())


def heaps_cost(memory_limit: int, js_heap_mb: int) -> int:
    """The most memory a worker's heaps may take (what the pool's budget counts): its WebAssembly heap cap
    plus its JS heap cap."""
    return memory_limit + (js_heap_mb << 20)


@dataclass(frozen=True)
class WorkerConfig:
    dist_dir: Path
    memory_limit: int = DEFAULT_MEMORY_LIMIT  # WebAssembly heap (Python objects live there)
    js_heap_mb: int = 512  # V8 old space (JS side: proxies, output buffers)
    # V8 young generation: 1 MB semi-spaces instead of V8's default (up to 16 MB): little JS runs here, so a
    # larger young generation only adds resident memory.
    semi_space_mb: int = 1
    max_output: int = 100_000  # characters of logs per call
    allow_net: Sequence[str] = field(default_factory=tuple)
    start_timeout_s: float = 90.0
    grace_s: float = 3.0  # after an interrupt, before the worker is killed
    deno_bin: str | None = None
    preload: Sequence[str] = DEFAULT_PRELOAD  # imported during warm-up
    worker_script: Path = WORKER_SCRIPT
    # The process's working directory: one it cannot read (the pool's sandbox folder `cwd/`); None: "/".
    cwd: Path | None = None
    user: WorkerUser | None = None  # run as this user (the server must be root); None: as ourselves
    confiner: Confiner = field(default_factory=Confiner)  # the OS limits' mechanism (a cgroup per worker)
    max_tasks: int = 128  # threads (and processes) a worker may run, Deno's own ~20 included
    # CPU cores a worker may use at once: V8 works on background threads beside the interpreter (compiling,
    # collecting), so at 1 core a worker is throttled in nearly every 100 ms period of a matplotlib plot and of
    # its start; 2 cores leave room for them
    cpus: float = 2.0

    @property
    def cost(self) -> int:
        return heaps_cost(self.memory_limit, self.js_heap_mb)

    def limits(self) -> Limits:
        """What the operating system holds the whole process to: its heaps' caps plus the runtime's own
        memory (`RUNTIME_MEMORY`: Deno's code, V8's other spaces, Pyodide's files), tasks and CPU."""
        return Limits(memory_bytes=self.cost + RUNTIME_MEMORY, tasks=self.max_tasks, cpus=self.cpus)


def codegen_flags(memory_limit: int) -> list[str]:
    """The V8 flags of a worker with this WebAssembly heap cap that V8 checks a code cache against (a cache
    made with others is refused); the heap sizes are not among them."""
    return [f"--wasm-max-mem-pages={max(256, memory_limit // WASM_PAGE)}", "--expose-gc"]


def deno_command(cfg: WorkerConfig) -> list[str]:
    dist = str(Path(cfg.dist_dir).resolve())
    pages, gc = codegen_flags(cfg.memory_limit)
    cmd = [
        cfg.deno_bin or find_deno(),
        "run",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-npm",
        "--no-code-cache",
        f"--allow-read={dist}",
        (
            f"--v8-flags={pages},--max-old-space-size={cfg.js_heap_mb},"
            f"--max-semi-space-size={cfg.semi_space_mb},{gc}"
        ),
    ]
    if cfg.allow_net:
        hosts = [h.strip() for h in cfg.allow_net if h.strip()]
        if any(re.search(r"[\s,=]", h) for h in hosts):
            raise ValueError(f"bad allow-net host list {cfg.allow_net!r}")
        if hosts:
            cmd.append("--allow-net=" + ",".join(hosts))
    if any(not re.fullmatch(r"[A-Za-z0-9_.-]+", p) for p in cfg.preload):
        raise ValueError(f"bad preload list {cfg.preload!r}")
    return [*cmd, str(cfg.worker_script), dist, ",".join(cfg.preload) or "-", DATA_DIR]


async def limit_data(pid: int, limit: int, user: WorkerUser | None) -> bool:
    """Set RLIMIT_DATA (soft and hard) of process `pid`; whether it was set. Another user's limits need
    CAP_SYS_RESOURCE, which root lacks in some containers (this machine kind): then util-linux's `prlimit`,
    run as the worker's own user, sets it (a process may lower the limits of its own user's processes)."""
    try:
        resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
        return True
    except PermissionError:
        tool = shutil.which("prlimit", path="/usr/bin:/bin")
        if user is None or tool is None:
            return False
    except (OSError, ValueError):
        return False
    spawn = spawn_setup(user)
    proc = await asyncio.create_subprocess_exec(
        *spawn.prefix,
        tool,
        f"--pid={pid}",
        f"--data={limit}:{limit}",
        env={},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        preexec_fn=spawn.preexec_fn,
    )
    return await proc.wait() == 0

"""The pool's workers' settings and walls: their `WorkerConfig`, the sandbox folder and the kernel's confiner
set up when the pool starts (taken down when it closes), and the walls in words."""

from __future__ import annotations

import asyncio
import dataclasses

from interpreter_service.dist.distribution import checked_dist_dir
from interpreter_service.pool.config import PoolConfig
from interpreter_service.process.confine import detect
from interpreter_service.process.launch import WORKER_SCRIPT, WorkerConfig, find_deno
from interpreter_service.process.sandbox_dir import (
    SandboxDir,
    prepare_sandbox_dir,
    remove_sandbox_dir,
    resolve_user,
)

__all__ = ["describe", "lower_walls", "raise_walls", "worker_config"]


def worker_config(config: PoolConfig, tier: int) -> WorkerConfig:
    """The warm workers' settings: the distribution checked, the user resolved, `tier` the WebAssembly heap
    cap."""
    return WorkerConfig(
        dist_dir=checked_dist_dir(config.dist_dir),
        memory_limit=tier,
        js_heap_mb=config.js_heap_mb,
        max_output=config.max_output,
        allow_net=tuple(config.allow_net),
        grace_s=config.grace_s,
        start_timeout_s=config.start_timeout_s,
        preload=tuple(config.preload),
        user=resolve_user(config.user),
    )


async def raise_walls(cfg: WorkerConfig, isolation: str) -> tuple[SandboxDir, WorkerConfig]:
    """The neutral folder the workers run from (a copy of the distribution, the worker script, Deno) and the
    kernel's mechanism `isolation` asks for; `cfg` made to use them."""
    sandbox = await asyncio.to_thread(
        prepare_sandbox_dir, cfg.dist_dir, WORKER_SCRIPT, cfg.deno_bin or find_deno()
    )
    confiner = await asyncio.to_thread(detect, isolation)
    walled = dataclasses.replace(
        cfg,
        dist_dir=sandbox.dist_dir,
        worker_script=sandbox.worker_script,
        deno_bin=sandbox.deno_bin,
        cwd=sandbox.cwd,
        confiner=confiner,
    )
    return sandbox, walled


async def lower_walls(cfg: WorkerConfig, sandbox: SandboxDir | None) -> None:
    """Close the confiner (its groups swept) and remove the sandbox folder, once no worker runs."""
    await asyncio.to_thread(cfg.confiner.close)
    if sandbox is not None:
        await asyncio.to_thread(remove_sandbox_dir, sandbox.root)


def describe(cfg: WorkerConfig) -> str:
    """The walls around each worker, in words: the kernel's mechanism (a cgroup per worker, or none), then
    what holds everywhere (Deno's permissions, RLIMIT_DATA, no_new_privs, the watchdog)."""
    user = f"user {cfg.user.name}" if cfg.user else "the server's user"
    kernel = {"cgroup2": "cgroup v2", "cgroup1": "cgroup v1"}.get(cfg.confiner.name)
    per = f"per worker: memory {cfg.limits().memory_bytes >> 20} MiB, {cfg.max_tasks} tasks, {cfg.cpus:g} cpu"
    first = f"{kernel} ({per})" if kernel else f"no cgroup (the watchdog holds {per})"
    return f"{first}; Deno permissions, RLIMIT_DATA, no_new_privs, watchdog; as {user}"

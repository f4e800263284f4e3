"""A shared sandbox service run as a real subprocess (`python -m interpreter_service serve`), and gateways on it
or on a pool of real workers in the gateway's own process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from interpreter_service.pool import PoolConfig, WorkerPool
from tests.support.fakes import FakeEngine
from tests.support.serving import LiveServer, free_port
from vllm_responses.config import Config
from vllm_responses.server import interpreter_from_config
from vllm_responses.store.memory import MemoryStore

__all__ = ["SandboxService", "gateway", "pool_gateway"]

ROOT = Path(__file__).resolve().parents[2]


class SandboxService:
    """`python -m interpreter_service serve --port P --token T` on 127.0.0.1; `kill()` is a kill -9."""

    def __init__(self, token: str | None, *, workers: int = 1, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.token = token
        self.workers = workers
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = open(os.devnull, "wb")  # noqa: SIM115 - held for the process' life

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240.0) -> SandboxService:
        cmd = [sys.executable, "-m", "interpreter_service", "serve", "--port", str(self.port)]
        cmd += ["--workers", str(self.workers), "--spares", "0", "--timeout", "20", *self.extra]
        if self.token:
            cmd += ["--token", self.token]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("VR_INTERPRETER_TOKEN", None)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=self.log)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the sandbox service exited with {self.proc.returncode}")
            try:  # uvicorn answers only once the lifespan (the warm pool) has started
                if httpx.get(self.url + "/health", headers=headers, timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError("the sandbox service did not start")

    def kill(self) -> None:
        """kill -9 the service (no clean-up runs; its Deno workers end when their pipes close)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def gateway(config: Config, engine: Any) -> LiveServer:
    """A gateway (started) on `engine` whose sandbox is the one `config` names, opened as `serve` opens it
    (`server.interpreter_from_config`), with a store of its own."""

    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        interp = interpreter_from_config(cfg)
        assert interp is not None
        async with interp:
            yield engine, interp, MemoryStore()

    return LiveServer(config, engine, None, opener=opener).start(timeout=120)


def pool_gateway(dist_dir: Path, *, max_workers: int, code_interpreter_timeout: float) -> LiveServer:
    """A gateway (started) on a scripted engine and a store of its own, whose sandbox is a pool of real workers
    in its process: one warm, at most `max_workers`, 256 MiB each, queued callers waiting up to 120 s."""

    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        pool = WorkerPool(
            PoolConfig(
                workers=1,
                spares=0,
                max_workers=max_workers,
                memory_budget="1536m",
                memory_limit="256m",
                js_heap_mb=256,
                queue_timeout_s=120,
                dist_dir=dist_dir,
                preload=(),
                start_timeout_s=120,
            )
        )
        async with pool:
            yield FakeEngine(), pool, MemoryStore()

    config = Config(code_interpreter_timeout=code_interpreter_timeout)
    return LiveServer(config, None, None, opener=opener).start(timeout=300)

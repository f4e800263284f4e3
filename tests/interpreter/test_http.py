"""The HTTP API and `HTTPInterpreter` client: in-process (ASGI) on the shared pool, and a real `serve` process."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from interpreter_service.api import ContainerNotFound, InterpreterError, PoolExhausted
from interpreter_service.pool import WorkerPool
from interpreter_service.service.app import create_app
from interpreter_service.service.client import HTTPInterpreter

from .conftest import png_size

pytestmark = pytest.mark.sandbox
ROOT = Path(__file__).resolve().parents[2]


async def test_http_api_in_process(pool: WorkerPool, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[object] = []  # what each create asked of the pool (wait_for_worker)
    create = pool.create_container

    async def spy(**kw: Any) -> Any:
        waits.append(kw.get("wait_for_worker"))
        return await create(**kw)

    monkeypatch.setattr(pool, "create_container", spy)
    transport = httpx.ASGITransport(app=create_app(pool, manage_lifecycle=False))
    async with asyncio.timeout(60), HTTPInterpreter("http://sandbox", transport=transport) as client:
        info = await client.create_container(name="http")
        try:
            assert (await client.get_container(info.id)).name == "http"
            assert info.id in {c.id for c in await client.list_containers()}
            r = await client.execute(
                info.id, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint('hi')\n6 * 7"
            )
            assert (
                r.ok and r.logs == "hi\n42\n" and len(r.images) == 1 and png_size(r.images[0]) == (640, 480)
            )
            r = await client.execute(info.id, "raise ValueError('boom')")
            assert r.error_kind == "exception" and r.error == "ValueError: boom"
            f = await client.write_file(info.id, "a.txt", b"hello")
            assert f.path == "/mnt/data/a.txt" and f.bytes == 5
            assert await client.read_file(info.id, "/mnt/data/a.txt") == b"hello"
            assert [x.path for x in await client.list_files(info.id)] == ["/mnt/data/a.txt"]
            await client.delete_file(info.id, "a.txt")
            assert await client.list_files(info.id) == []
            with pytest.raises(InterpreterError):
                await client.delete_file(info.id, "a.txt")
            other = await client.create_container(wait_for_worker=False)  # its worker in the background
            assert waits == [True, False]
            assert (await client.execute(other.id, "print(2)")).logs == "2\n"
            try:
                async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as raw:
                    health = (await raw.get("/health")).json()
                assert health["status"] == "ok" and health["containers_live"] == 2
                assert health["max_containers"] == 2 and "restarts" in health
                with pytest.raises(PoolExhausted):  # after the queue timeout (the pool's is 1 s)
                    await client.create_container()
            finally:
                await client.delete_container(other.id)
        finally:
            await client.delete_container(info.id)
        with pytest.raises(ContainerNotFound):
            await client.execute(info.id, "1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_serve_subprocess(dist_dir: Path) -> None:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "interpreter_service",
        "serve",
        "--port",
        str(port),
        "--workers",
        "1",
        "--spares",
        "0",
        "--dist-dir",
        str(dist_dir),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(150), HTTPInterpreter(f"http://127.0.0.1:{port}") as client:
            while True:  # wait for the pool to be warm (the lifespan starts it before serving)
                try:
                    info = await client.create_container()
                    break
                except Exception:  # noqa: BLE001 - not up yet
                    await asyncio.sleep(0.5)
            r = await client.execute(info.id, "import numpy as np\nkept = int(np.arange(5).sum())\nkept")
            assert r.ok and r.logs == "10\n"
            # a client that goes away interrupts its call; the container keeps its state
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as raw:
                with pytest.raises(httpx.ReadTimeout):
                    await raw.post(
                        f"/v1/containers/{info.id}/execute",
                        json={"code": "while True: pass", "timeout_s": 60},
                        timeout=1.5,
                    )
            t0 = asyncio.get_running_loop().time()
            r = await client.execute(info.id, "kept")
            assert r.ok and r.logs == "10\n" and not r.worker_restarted
            assert asyncio.get_running_loop().time() - t0 < 10, "the abandoned call was not interrupted"
            await client.delete_container(info.id)
    finally:
        proc.terminate()
        try:
            async with asyncio.timeout(20):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()

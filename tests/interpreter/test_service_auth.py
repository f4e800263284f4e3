"""The shared service's token, bind rule and restart detection, and `HTTPInterpreter` over every method.

Fast: the service app runs in process (ASGI) on the fake interpreter; one test starts the real `serve`
command, which must refuse a non-loopback address without a token before it starts any worker.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from interpreter_service.api import (
    ContainerNotFound,
    InterpreterError,
    MemoryLimitRefused,
    PoolExhausted,
    PoolStats,
)
from interpreter_service.service.app import create_app
from interpreter_service.service.auth import BOOT_HEADER, check_bind, is_loopback
from interpreter_service.service.client import HTTPInterpreter
from tests.support.fakes import FakeInterpreter

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "t0ken-for-tests"


class StatsFake(FakeInterpreter):
    """The fake, with a pool's `stats()`."""

    def stats(self) -> PoolStats:
        return PoolStats(
            containers_live=len(self.containers),
            containers_busy=0,
            workers_idle=1,
            workers_starting=0,
            waiters=0,
            max_containers=self.max_containers,
            memory_budget_bytes=2 << 30,
            memory_reserved_bytes=0,
            restarts={},
            start_failures=0,
            isolation="none",
            watchdog_kills=0,
        )


class Switch(httpx.AsyncBaseTransport):
    """An ASGI transport whose app can be swapped: a service that restarted (a new boot id, no containers)."""

    def __init__(self, app: Starlette) -> None:
        self.inner = httpx.ASGITransport(app=app)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)


def _client(transport: httpx.AsyncBaseTransport, token: str | None = TOKEN) -> HTTPInterpreter:
    return HTTPInterpreter("http://sandbox", token=token, transport=transport)


async def test_every_request_needs_the_token() -> None:
    app = create_app(StatsFake(), manage_lifecycle=False, token=TOKEN, boot_id="boot1")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox") as raw:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            for method, url in (("GET", "/health"), ("POST", "/v1/containers"), ("GET", "/v1/containers")):
                r = await raw.request(method, url, headers=headers)
                assert r.status_code == 401, (method, url, headers)
                assert r.json()["error"]["type"] == "unauthorized"
                assert r.headers["www-authenticate"] == "Bearer"
        r = await raw.get("/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200 and r.headers[BOOT_HEADER] == "boot1"
        assert r.json()["boot_id"] == "boot1" and r.json()["containers_live"] == 0
    async with _client(httpx.ASGITransport(app=app), token="wrong") as bad:
        with pytest.raises(InterpreterError, match="refused this server's credentials \\(HTTP 401\\)"):
            await bad.create_container()
        assert bad.stats() is None


async def test_the_client_covers_the_interface() -> None:
    fake = StatsFake(max_containers=2)
    app = create_app(fake, manage_lifecycle=False, token=TOKEN, max_timeout_s=5.0)
    async with asyncio.timeout(30), _client(httpx.ASGITransport(app=app)) as client:
        stats = client.stats()  # fetched by start()
        assert stats is not None and stats["max_containers"] == 2 and stats["memory_budget_bytes"] == 2 << 30
        info = await client.create_container(name="n", memory_limit="1g")
        assert (await client.get_container(info.id)).name == "n"
        assert [c.id for c in await client.list_containers()] == [info.id]
        r = await client.execute(info.id, "x = 6 * 7\nprint(x)")
        assert r.ok and r.logs == "42\n"
        r = await client.execute(info.id, "# fake-timeout", timeout_s=100)
        assert r.error == "Execution timed out after 5.0 s"  # the service's limit, not the 100 s asked
        # pins arrive in the order they were asked (they are sent in the background)
        client.pin(info.id)
        client.pin(info.id)
        client.unpin(info.id)
        await client.settle_pins()
        assert fake.pins[info.id] == 1
        client.unpin(info.id)
        await client.settle_pins()
        assert fake.pins[info.id] == 0
        # files
        f = await client.write_file(info.id, "a.txt", b"hi")
        assert f.path == "/mnt/data/a.txt" and f.source == "user"
        assert await client.read_file(info.id, "a.txt") == b"hi"
        assert [x.path for x in await client.list_files(info.id)] == ["/mnt/data/a.txt"]
        await client.delete_file(info.id, "a.txt")
        with pytest.raises(InterpreterError, match="no such file"):
            await client.read_file(info.id, "a.txt")
        # capacity and memory: the service's limits
        await client.create_container()
        with pytest.raises(PoolExhausted):
            await client.create_container()
        with pytest.raises(MemoryLimitRefused):
            client.check_memory_limit("16g")  # never: above 4 GiB, refused before any request
        client.check_memory_limit("1g")
        await client.refresh()
        assert client.stats()["containers_live"] == 2  # type: ignore[index]
        await client.delete_container(info.id)
        with pytest.raises(ContainerNotFound):
            await client.execute(info.id, "1")


async def test_a_restarted_service_is_noticed() -> None:
    switch = Switch(create_app(StatsFake(), manage_lifecycle=False, token=TOKEN, boot_id="first"))
    async with _client(switch) as client:
        info = await client.create_container()
        switch.inner = httpx.ASGITransport(
            app=create_app(StatsFake(), manage_lifecycle=False, token=TOKEN, boot_id="second")
        )
        with pytest.raises(ContainerNotFound, match="the sandbox service restarted since"):
            await client.execute(info.id, "1")
        assert client.restarts_seen == 1


async def test_an_unreachable_service_is_an_interpreter_error() -> None:
    async with HTTPInterpreter("http://127.0.0.1:9", token=TOKEN) as client:  # start() only warns
        with pytest.raises(InterpreterError, match="unreachable or restarted"):
            await client.execute("cntr_x", "1")
        with pytest.raises(InterpreterError):
            await client.refresh()
        assert client.stats() is None


def test_bind_rule() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.3.4.5") and not is_loopback("0.0.0.0") and not is_loopback("sandbox.internal")
    assert check_bind("127.0.0.1", None) is None and check_bind("0.0.0.0", "t") is None
    assert "without a token" in (check_bind("0.0.0.0", None) or "")


def test_serve_refuses_0_0_0_0_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "VR_INTERPRETER_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "interpreter_service", "serve", "--host", "0.0.0.0", "--port", "1"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to serve the code interpreter on 0.0.0.0 without a token" in done.stderr
    assert "--token" in done.stderr and "VR_INTERPRETER_TOKEN" in done.stderr


def test_stats_keys_newer_than_a_service_are_optional() -> None:
    """A service older than the OS limits or the adaptive spares still gives its stats (the client checks
    only the keys every service has)."""
    assert {"isolation", "watchdog_kills", "spare_target", "demand_peak", "start_limit"}.isdisjoint(
        PoolStats.__required_keys__
    )
    assert "containers_live" in PoolStats.__required_keys__

"""`/health` (liveness) and `/ready` (readiness, per-check detail) on live servers over the fake engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.test_responses import wait_until
from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from vllm_responses.api.ops import _sandbox_check
from vllm_responses.config import Config


def test_health_is_liveness(fake_server: LiveServer) -> None:
    r = httpx.get(fake_server.base_url + "/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_ready_reports_every_check(fake_server: LiveServer) -> None:
    wait_until(
        lambda: "answered" in httpx.get(fake_server.base_url + "/ready").json()["checks"]["engine"]["detail"]
    )
    r = httpx.get(fake_server.base_url + "/ready")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"server", "engine", "store", "sandbox"}
    assert all(check["ok"] for check in body["checks"].values())
    assert body["checks"]["server"]["detail"] == "serving"


@pytest.fixture
def own_server() -> Iterator[LiveServer]:
    server = LiveServer(Config(), FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


def test_ready_fails_when_the_store_does_not_answer(own_server: LiveServer) -> None:
    async def broken(response_id: str) -> Any:
        raise OSError("disk gone")

    own_server.store.get = broken  # type: ignore[method-assign]
    r = httpx.get(own_server.base_url + "/ready")
    assert r.status_code == 503
    checks = r.json()["checks"]
    assert checks["store"] == {"ok": False, "detail": "OSError: disk gone"}
    assert checks["engine"]["ok"] and checks["server"]["ok"]
    assert httpx.get(own_server.base_url + "/health").status_code == 200  # alive all the same


def test_ready_fails_when_the_engine_refuses_pings(own_server: LiveServer) -> None:
    engine: FakeEngine = own_server.engine

    async def refuse() -> None:
        raise TimeoutError("no answer")

    engine.ping = refuse  # type: ignore[method-assign]
    wait_until(
        lambda: httpx.get(own_server.base_url + "/ready").status_code == 503, timeout_s=20
    )  # next ping: <= 5 s
    assert httpx.get(own_server.base_url + "/ready").json()["checks"]["engine"] == {
        "ok": False,
        "detail": "no answer",
    }


class _Pool:
    def __init__(self, stats: dict[str, Any], *, closed: bool = False) -> None:
        self._stats = stats
        self.closed = closed
        self.start_errors = ["WorkerDied: deno exited with status 1"]

    def stats(self) -> dict[str, Any]:
        return self._stats


def test_the_sandbox_check_wants_a_worker_alive_or_starting() -> None:
    assert _sandbox_check(None, False) == {"ok": True, "detail": "disabled"}
    assert _sandbox_check(_Pool({"workers_idle": 1}), True)["ok"]  # type: ignore[arg-type]
    assert _sandbox_check(_Pool({"workers_starting": 2}), True)["ok"]  # type: ignore[arg-type]
    assert _sandbox_check(_Pool({"containers_live": 1, "workers_idle": 0}), True)["ok"]  # type: ignore[arg-type]
    dead = _sandbox_check(_Pool({"containers_live": 0, "workers_idle": 0, "workers_starting": 0}), True)  # type: ignore[arg-type]
    assert dead == {
        "ok": False,
        "detail": "no worker alive or starting (last start error: WorkerDied: deno exited with status 1)",
    }
    assert _sandbox_check(_Pool({"workers_idle": 3}, closed=True), True) == {"ok": False, "detail": "closed"}  # type: ignore[arg-type]

"""The operational endpoints: liveness (`/health`), readiness (`/ready`, per-check detail) and `/metrics`; the
detail and `/metrics` need the operator's key where one is configured (`Config.ops_key`)."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interpreter_service import Interpreter, InterpreterError
from vllm_responses.api.auth import bearer_token
from vllm_responses.api.state import AppState, app_state
from vllm_responses.observe.metrics import CONTENT_TYPE, LiveCollector, LiveSources, render
from vllm_responses.protocol.errors import Unauthorized
from vllm_responses.service.lifecycle import Lifecycle
from vllm_responses.store.base import ResponseStore

__all__ = ["ops_routes", "pool_stats", "refresh_pool"]

# A ping the engine has not answered for this long makes the server not ready (a busy CPU engine answers
# between scheduler steps, which can take seconds under load).
ENGINE_SILENT_S = 30.0
STORE_TIMEOUT_S = 5.0
SANDBOX_TIMEOUT_S = 5.0  # a shared sandbox service's /health (`Interpreter.refresh`)
_PROBE_ID = "resp_readiness_probe"

Check = dict[str, Any]


def pool_stats(interpreter: Interpreter | None) -> dict[str, Any] | None:
    """The sandbox pool's `stats()` when it has them (the in-process `WorkerPool`; the shared service's
    client as of its last `refresh`)."""
    stats = getattr(interpreter, "stats", None)
    if not callable(stats):
        return None
    value = stats()
    return value if isinstance(value, dict) else None


def _server_check(lifecycle: Lifecycle) -> Check:
    return {"ok": lifecycle.state == "serving", "detail": lifecycle.reason or lifecycle.state}


def _engine_check(lifecycle: Lifecycle) -> Check:
    monitor = lifecycle.monitor
    if monitor is None:
        return {"ok": False, "detail": "not started"}
    dead = monitor.engine.dead
    if dead is not None:
        return {"ok": False, "detail": f"dead: {dead}"}
    if monitor.pending_since is not None and time.monotonic() - monitor.pending_since > ENGINE_SILENT_S:
        return {"ok": False, "detail": f"no answer for {time.monotonic() - monitor.pending_since:.0f} s"}
    if monitor.last_error is not None:
        return {"ok": False, "detail": monitor.last_error}
    if monitor.last_answer is None:
        return {"ok": True, "detail": "alive (first ping pending)"}
    return {
        "ok": True,
        "detail": f"answered {time.monotonic() - monitor.last_answer:.1f} s ago in "
        f"{(monitor.last_rtt_s or 0) * 1000:.0f} ms",
    }


async def _store_check(store: ResponseStore) -> Check:
    started = time.monotonic()
    try:
        async with asyncio.timeout(STORE_TIMEOUT_S):
            await store.get(_PROBE_ID)
    except Exception as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "detail": f"answered in {(time.monotonic() - started) * 1000:.0f} ms"}


async def refresh_pool(interpreter: Interpreter | None) -> str | None:
    """Bring a remote pool's stats up to date (bounded); why it failed, or None."""
    refresh = getattr(interpreter, "refresh", None)  # `Interpreter.refresh`; test doubles may lack it
    if not callable(refresh):
        return None
    try:
        async with asyncio.timeout(SANDBOX_TIMEOUT_S):
            await refresh()
    except (InterpreterError, TimeoutError) as exc:
        return str(exc) or "no answer in time"
    return None


def _sandbox_check(interpreter: Interpreter | None, enabled: bool, unreachable: str | None = None) -> Check:
    """`unreachable`: why a remote pool did not answer `refresh_pool` (None: it did, or it is local)."""
    if interpreter is None:
        return {"ok": True, "detail": "disabled" if not enabled else "none"}
    if getattr(interpreter, "closed", False):  # the pool's and the shared service client's `closed`
        return {"ok": False, "detail": "closed"}
    if unreachable is not None:
        return {"ok": False, "detail": unreachable}
    stats = pool_stats(interpreter)
    if stats is None:
        return {"ok": True, "detail": "no stats (remote pool)"}
    # a worker per container, idle ones and those starting
    names = ("containers_live", "workers_idle", "workers_starting")
    workers = sum(int(stats[k]) for k in names if isinstance(stats.get(k), int))
    if workers == 0:
        errors = getattr(interpreter, "start_errors", None) or ["none"]
        return {"ok": False, "detail": f"no worker alive or starting (last start error: {errors[-1]})"}
    isolation = stats.get("isolation") or "unknown"
    return {"ok": True, "detail": f"{workers} worker(s) alive or starting; isolation: {isolation}"}


def _operator(request: Request, state: AppState) -> bool:
    """Whether the request may read the operational detail: `Authorization: Bearer <Config.ops_key>`, or
    no key is configured at all (with only a keys file and no operator key, nobody may)."""
    config = state.service.config
    key = config.ops_key
    if not key:
        return not config.auth_configured
    token = bearer_token(request.headers.get("authorization", ""))
    return secrets.compare_digest(token.encode(), key.encode())


async def health(request: Request) -> Response:
    """Liveness: the process is up and its event loop answers."""
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> Response:
    """Readiness: serving (not draining), engine alive and answering, store reachable, sandbox able to
    hand out a container. 200 when all hold, else 503; the body has every check's detail for the operator
    (`_operator`), only the status for others (probes read the status code)."""
    state = app_state(request)
    service = state.service
    checks = {
        "server": _server_check(state.lifecycle),
        "engine": _engine_check(state.lifecycle),
        "store": await _store_check(service.store),
        "sandbox": _sandbox_check(
            service.interpreter, service.config.code_interpreter, await refresh_pool(service.interpreter)
        ),
    }
    ok = all(c["ok"] for c in checks.values())
    body: dict[str, Any] = {"status": "ready" if ok else "unavailable"}
    if _operator(request, state):
        body["checks"] = checks
    return JSONResponse(body, status_code=200 if ok else 503)


def _live_sources(state: AppState) -> LiveSources:
    """What the live gauges of /metrics read at each scrape."""
    service, lifecycle = state.service, state.lifecycle
    return LiveSources(
        running=lambda: sum(not r.done.is_set() for r in list(service.runs.values())),
        engine_alive=lambda: service.engine.dead is None,
        draining=lambda: lifecycle.state in ("draining", "failed"),
        pool_stats=lambda: pool_stats(service.interpreter),
        admission=lambda: service.admission,
    )


async def metrics(request: Request) -> Response:
    """Prometheus text format: vLLM's engine metrics and ours (a shared sandbox service's pool as it
    answers now; its gauges are left out while it does not)."""
    state = app_state(request)
    if not _operator(request, state):
        err = Unauthorized(
            "/metrics needs 'Authorization: Bearer <key>' with the operator key (--operator-key, else the "
            "API key)."
        )
        return JSONResponse(err.body(), status_code=err.status, headers={"WWW-Authenticate": "Bearer"})
    await refresh_pool(state.service.interpreter)
    return Response(render(LiveCollector(_live_sources(state))), media_type=CONTENT_TYPE)


def ops_routes() -> list[Route]:
    return [Route("/health", health), Route("/ready", ready), Route("/metrics", metrics)]

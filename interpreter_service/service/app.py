"""Starlette app exposing an `Interpreter` over HTTP (what `python -m interpreter_service serve` runs).

Every `Interpreter` method has a route, so gateways can share the pool (`client.HTTPInterpreter`). The pool's
own limits hold whatever a caller asks: its capacity and memory budget (a create waits at most its queue
timeout, then 503 `pool_exhausted`), and a call runs at most `max_timeout_s` (`serve --timeout`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interpreter_service.api import (
    ContainerNotFound,
    Interpreter,
    InterpreterError,
    MemoryLimitRefused,
    OwnerQuota,
    PoolExhausted,
    QuotaExceeded,
)
from interpreter_service.service.auth import TokenGuard
from interpreter_service.service.wire import to_json

__all__ = ["create_app"]

log = logging.getLogger("interpreter_service.http")  # the name it has always logged under
Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def _owner(value: Any) -> str | None:
    """A container's `owner` label as a create body gives it: absent, or a string of at most 200 characters."""
    if value is None or (isinstance(value, str) and len(value) <= 200):
        return value
    raise ValueError("owner must be a string of at most 200 characters")


def _quota(value: Any) -> OwnerQuota | None:
    """An owner's quota as a create body gives it: absent, or two counts of at least 0."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"max_containers", "max_memory_bytes"}:
        raise ValueError("quota must be an object with max_containers and max_memory_bytes")
    counts = [value.get(k, 0) for k in ("max_containers", "max_memory_bytes")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise ValueError("quota's max_containers and max_memory_bytes must be integers of at least 0")
    return OwnerQuota(*counts)


def _guard(fn: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except ContainerNotFound as e:
            return _error(404, "container_not_found", f"no container {e}")
        except QuotaExceeded as e:
            return _error(503, "quota_exceeded", str(e))
        except PoolExhausted as e:
            return _error(503, "pool_exhausted", str(e))
        except MemoryLimitRefused as e:
            return _error(400, "memory_limit_refused", str(e))
        except InterpreterError as e:
            return _error(500, "interpreter_error", str(e))
        except (ValueError, KeyError, TypeError) as e:
            return _error(400, "bad_request", repr(e))

    return wrapped


class _Handlers:
    """The routes' handlers over one interpreter: its pool, its containers and their files."""

    def __init__(self, interp: Interpreter, max_timeout_s: float | None, boot: str) -> None:
        self.interp = interp
        self.max_timeout_s = max_timeout_s
        self.boot = boot

    # --- the pool ---------------------------------------------------------------------------------------

    async def health(self, _r: Request) -> Response:
        stats = getattr(self.interp, "stats", None)
        value = stats() if callable(stats) else None
        snapshot: dict[str, Any] = dict(value) if value else {}
        limits = {
            "max_timeout_s": self.max_timeout_s,
            "queue_timeout_s": getattr(self.interp, "queue_timeout_s", None),
        }
        return JSONResponse({"status": "ok", "boot_id": self.boot, **snapshot, "limits": limits})

    async def check_memory(self, r: Request) -> Response:
        body = await r.json()
        self.interp.check_memory_limit(body.get("memory_limit"))
        return Response(status_code=204)

    # --- containers -------------------------------------------------------------------------------------

    async def pin(self, r: Request) -> Response:
        self.interp.pin(r.path_params["cid"])
        return Response(status_code=204)

    async def unpin(self, r: Request) -> Response:
        self.interp.unpin(r.path_params["cid"])
        return Response(status_code=204)

    async def create(self, r: Request) -> Response:
        body = await r.json() if await r.body() else {}
        info = await self.interp.create_container(
            name=body.get("name"),
            memory_limit=body.get("memory_limit"),
            expires_after_s=body.get("expires_after_s"),
            owner=_owner(body.get("owner")),
            quota=_quota(body.get("quota")),
            wait_for_worker=body.get("wait_for_worker") is not False,
        )
        return JSONResponse(to_json(info), status_code=201)

    async def list_(self, _r: Request) -> Response:
        return JSONResponse({"data": [to_json(c) for c in await self.interp.list_containers()]})

    async def get(self, r: Request) -> Response:
        return JSONResponse(to_json(await self.interp.get_container(r.path_params["cid"])))

    async def delete(self, r: Request) -> Response:
        await self.interp.delete_container(r.path_params["cid"])
        return Response(status_code=204)

    async def execute(self, r: Request) -> Response:
        body = await r.json()
        timeout_s = body.get("timeout_s")
        if timeout_s is not None and self.max_timeout_s is not None:
            timeout_s = min(float(timeout_s), self.max_timeout_s)  # the service's limit, whatever is asked
        task = asyncio.create_task(
            self.interp.execute(r.path_params["cid"], str(body["code"]), timeout_s=timeout_s)
        )
        try:
            while not task.done():  # a client that goes away cancels (interrupts) its code
                await asyncio.wait({task}, timeout=0.5)
                if not task.done() and await r.is_disconnected():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    return Response(status_code=499)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return JSONResponse(to_json(task.result()))

    # --- files ------------------------------------------------------------------------------------------

    async def put_file(self, r: Request) -> Response:
        info = await self.interp.write_file(r.path_params["cid"], r.query_params["path"], await r.body())
        return JSONResponse(to_json(info), status_code=201)

    async def get_file(self, r: Request) -> Response:
        data = await self.interp.read_file(r.path_params["cid"], r.query_params["path"])
        return Response(data, media_type="application/octet-stream")

    async def delete_file(self, r: Request) -> Response:
        await self.interp.delete_file(r.path_params["cid"], r.query_params["path"])
        return Response(status_code=204)

    async def list_files(self, r: Request) -> Response:
        files = await self.interp.list_files(r.path_params["cid"])
        return JSONResponse({"data": [to_json(f) for f in files]})


def _route(path: str, handler: Handler, method: str) -> Route:
    """`handler` at `path` for `method`, its interpreter errors answered as `_guard` says."""
    return Route(path, _guard(handler), methods=[method])


def _pool_routes(h: _Handlers) -> list[Route]:
    return [
        _route("/health", h.health, "GET"),
        _route("/v1/memory-limit/check", h.check_memory, "POST"),
    ]


def _container_routes(h: _Handlers) -> list[Route]:
    one = "/v1/containers/{cid}"
    return [
        _route(one + "/pin", h.pin, "POST"),
        _route(one + "/unpin", h.unpin, "POST"),
        _route("/v1/containers", h.create, "POST"),
        _route("/v1/containers", h.list_, "GET"),
        _route(one, h.get, "GET"),
        _route(one, h.delete, "DELETE"),
        _route(one + "/execute", h.execute, "POST"),
    ]


def _file_routes(h: _Handlers) -> list[Route]:
    files = "/v1/containers/{cid}/files"
    return [
        _route(files, h.list_files, "GET"),
        _route(files + "/content", h.put_file, "PUT"),
        _route(files + "/content", h.get_file, "GET"),
        _route(files + "/content", h.delete_file, "DELETE"),
    ]


def _lifespan(
    interp: Interpreter, manage_lifecycle: bool
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: with `manage_lifecycle` it starts `interp` and closes it with the app."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if manage_lifecycle:
            await interp.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await interp.aclose()

    return lifespan


def create_app(
    interp: Interpreter,
    *,
    manage_lifecycle: bool = True,
    token: str | None = None,
    max_timeout_s: float | None = None,
    boot_id: str | None = None,
) -> Starlette:
    """An app serving `interp`; with `manage_lifecycle` it starts and closes it with the app. With `token`,
    every request needs `Authorization: Bearer <token>` (401 otherwise); `max_timeout_s` caps a call's
    `timeout_s`; `boot_id` (default: random) names this run of the service in every answer's header."""
    boot = boot_id or secrets.token_hex(8)
    handlers = _Handlers(interp, max_timeout_s, boot)
    routes = [*_pool_routes(handlers), *_container_routes(handlers), *_file_routes(handlers)]
    app = Starlette(routes=routes, lifespan=_lifespan(interp, manage_lifecycle))
    app.add_middleware(TokenGuard, token=token, boot_id=boot)
    return app

"""The Starlette application: its routes and middleware put together, the error handlers and the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from vllm_responses.api.auth import KeyRing
from vllm_responses.api.containers import container_routes
from vllm_responses.api.conversations import conversation_routes
from vllm_responses.api.embeddings import embedding_routes
from vllm_responses.api.failures import AuthFailures
from vllm_responses.api.files import file_routes
from vllm_responses.api.hosts import allowed_hosts, cors_origins
from vllm_responses.api.middleware import (
    APIKeyMiddleware,
    BodyLimitMiddleware,
    HostCheckMiddleware,
    OriginCheckMiddleware,
    ShutdownGate,
)
from vllm_responses.api.ops import ops_routes
from vllm_responses.api.playground import playground_routes
from vllm_responses.api.ratelimit import RateLimitMiddleware, RateLimits
from vllm_responses.api.responses import response_routes
from vllm_responses.api.state import EmbedderOpener, Opener, app_state, no_embedder, open_state
from vllm_responses.api.uploads import upload_routes
from vllm_responses.api.vector_stores import vector_store_routes
from vllm_responses.api.ws_caps import WebSocketCaps
from vllm_responses.config import Config
from vllm_responses.errors import DOMAIN_ERRORS, api_error
from vllm_responses.observe.logs import RequestIdMiddleware
from vllm_responses.protocol.errors import error_body
from vllm_responses.service.lifecycle import Lifecycle

__all__ = ["build_app"]

logger = logging.getLogger(__name__)


async def list_models(request: Request) -> Response:
    state = app_state(request)
    created = int(state.started_at)
    return JSONResponse(
        {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "vllm-responses"}
                for name in [*state.service.model_names, *state.embeddings.model_names]
            ],
        }
    )


async def _api_error(request: Request, exc: Exception) -> Response:
    err = api_error(exc)
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
    return JSONResponse(
        error_body(str(exc.detail), "invalid_request_error", code=kind), status_code=exc.status_code
    )


async def _server_error(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse(
        error_body("The server had an error processing the request.", "server_error"), status_code=500
    )


class _App(Starlette):
    def build_middleware_stack(self) -> ASGIApp:
        # The request id outermost, so that even a 500 from Starlette's error middleware carries it.
        return RequestIdMiddleware(super().build_middleware_stack())


def build_app(
    config: Config,
    open_components: Opener,
    *,
    lifecycle: Lifecycle | None = None,
    open_embedder: EmbedderOpener = no_embedder,
) -> Starlette:
    """The app; `open_components` opens engine, sandbox pool and store for the lifespan and closes them,
    `open_embedder` the embedding model (default: none). `lifecycle` (default: a new one, with no runner to
    stop) is how the runner drains and stops it."""
    life = lifecycle or Lifecycle(config.shutdown_grace)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_state(config, open_components, life, app.state.keys, open_embedder) as state:
            app.state.vr = state  # read through `state.app_state`
            yield

    routes = [
        *ops_routes(),
        Route("/v1/models", list_models),
        *response_routes(),
        *embedding_routes(),
        *container_routes(),
        *file_routes(),
        *upload_routes(),
        *vector_store_routes(),
        *conversation_routes(),
        *playground_routes(),
    ]
    app = _App(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            **dict.fromkeys(DOMAIN_ERRORS, _api_error),
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    # the WebSocket route counts its open connections here
    app.state.ws_caps = WebSocketCaps(config.max_websockets, config.max_websockets_per_key)
    app.add_middleware(ShutdownGate, lifecycle=life)
    app.add_middleware(  # bodies bounded while read (inside the key check: no body is read before it)
        BodyLimitMiddleware,
        max_request_bytes=config.max_request_bytes,
        max_upload_bytes=config.max_upload_bytes,
    )
    # the keys (`reload` on SIGHUP: server.py) and the per-key meters, on the app for the server and tests
    app.state.keys, app.state.rate_limits = KeyRing.from_config(config), RateLimits()
    app.add_middleware(RateLimitMiddleware, limits=app.state.rate_limits)  # inside the key check: per key
    app.state.auth_failures = AuthFailures(config.auth_failures_per_minute)  # 401s per client address
    app.add_middleware(APIKeyMiddleware, keys=app.state.keys, failures=app.state.auth_failures)
    if config.allowed_origins:  # their pages' preflights answered (outside the key check: they carry none)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cors_origins(config.allowed_origins),
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["x-request-id", "retry-after"],
        )
    # the front door, outermost: a request by a name not ours or from another site's page goes no further
    app.add_middleware(OriginCheckMiddleware, allowed=config.allowed_origins)
    app.add_middleware(HostCheckMiddleware, allowed=allowed_hosts(config))
    return app

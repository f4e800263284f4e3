"""The Starlette application: routes, SSE framing, API-key check, error handlers and the lifespan."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from interpreter_service import Interpreter
from vllm_responses.api.containers import container_routes
from vllm_responses.api.conversations import conversation_routes
from vllm_responses.api.middleware import BodyLimitMiddleware
from vllm_responses.api.ops import ops_routes, pool_stats
from vllm_responses.api.pagination import cursor_page
from vllm_responses.api.params import json_body
from vllm_responses.api.playground import playground_routes
from vllm_responses.api.websocket import deny_websocket, responses_websocket
from vllm_responses.config import Config
from vllm_responses.context.compaction import compacted_response, parse_compact_request
from vllm_responses.engine.base import Engine
from vllm_responses.errors import DOMAIN_ERRORS, api_error
from vllm_responses.observe.logs import RequestIdMiddleware
from vllm_responses.observe.metrics import LiveCollector, LiveSources
from vllm_responses.protocol.errors import InvalidRequest, Unauthorized, error_body
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.requests import check_includes, parse_create_request
from vllm_responses.runs.restream import Restreams
from vllm_responses.runs.run import Run
from vllm_responses.service.admission import until_disconnect
from vllm_responses.service.lifecycle import Lifecycle, ShutdownGate
from vllm_responses.service.responses import ResponsesService
from vllm_responses.store.base import ResponseStore

__all__ = ["AppState", "build_app", "sse_frame"]

logger = logging.getLogger(__name__)


@dataclass
class AppState:
    """What the routes use, set up by the lifespan; routes reach it as `request.app.state.vr`."""

    service: ResponsesService
    started_at: float
    # --- observe (issue 16): shutdown and engine watch, live gauges for /metrics, SSE keep-alive ---
    lifecycle: Lifecycle
    live: LiveCollector | None = None
    keepalive_s: float = 0.0
    # --- persisted events (issue 18): streams of background responses this process does not run ---
    restreams: Restreams | None = None


def sse_frame(event: Event) -> bytes:
    """One SSE frame: `event:` line, one-line JSON `data:`, blank line, in a single write."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


def stored_sse_frame(kind: str, data: str) -> bytes:
    """`sse_frame` of a stored event: its type and its one-line JSON as kept (event_log.event_json)."""
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _state(request: Request) -> AppState:
    return request.app.state.vr  # type: ignore[no-any-return]


# An SSE comment: clients skip it; proxies with idle timeouts see bytes flowing (`--sse-keepalive`).
SSE_KEEPALIVE = b": keep-alive\n\n"


async def _stream(
    run: Run, starting_after: int | None, *, cancel_on_disconnect: bool, keepalive_s: float = 0.0
) -> AsyncIterator[bytes]:
    completed = False
    try:
        # one write for all frames ready at once; a keep-alive after `keepalive_s` s with nothing written
        async for batch in run.follow_batches(starting_after, idle_s=keepalive_s):
            yield b"".join(sse_frame(event) for event in batch) if batch else SSE_KEEPALIVE
        completed = True
    finally:
        if not completed and cancel_on_disconnect and not run.done.is_set():
            logger.info("client left response %s mid-stream: cancelling it", run.id)
            run.cancel()


async def _stored_stream(
    restreams: Restreams, response_id: str, starting_after: int | None, keepalive_s: float
) -> AsyncIterator[bytes]:
    async for batch in restreams.follow(response_id, starting_after, keepalive_s=keepalive_s):
        yield b"".join(stored_sse_frame(kind, data) for kind, data in batch) if batch else SSE_KEEPALIVE


_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def create_response(request: Request) -> Response:
    """Streamed: headers, `response.created` and `response.in_progress` go out as soon as the response is
    admitted (a 4xx before that for what the engine would refuse up front, a 429 when the server is full). A
    request waiting for admission leaves the queue when its client disconnects."""
    state = _state(request)
    req = parse_create_request(await json_body(request))
    run = await until_disconnect(request.receive, state.service.create(req))
    if run is None:
        return Response(status_code=499)  # the client left while its request waited (nobody reads this)
    if req.stream:
        return StreamingResponse(
            _stream(run, None, cancel_on_disconnect=not req.background, keepalive_s=state.keepalive_s),
            media_type="text/event-stream",
            headers=_SSE_HEADERS,
        )
    if req.background:
        return JSONResponse(run.builder.snapshot())
    try:
        if await until_disconnect(request.receive, run.done.wait()) is None:
            logger.info("client left response %s before its end: cancelling it", run.id)
            run.cancel()
            return Response(status_code=499)
    except asyncio.CancelledError:
        run.cancel()
        raise
    failure = run.failure
    if failure is not None and 400 <= failure.status < 500 and not run.builder.output:
        raise failure  # refused before any output: an error, as before a stream starts
    return JSONResponse(await state.service.get(run.id))


def _include_outputs(request: Request) -> bool | None:
    include = request.query_params.getlist("include[]") + request.query_params.getlist("include")
    check_includes(include)
    return ("code_interpreter_call.outputs" in include) if include else None


async def count_input_tokens(request: Request) -> Response:
    state = _state(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    # `model` and `input` are optional here; the rest is validated as for create.
    body = {**body, "model": body.get("model") or state.service.model_names[0]}
    if body.get("input") is None:
        body["input"] = []
    count = await state.service.count_input_tokens(parse_create_request(body))
    return JSONResponse({"object": "response.input_tokens", "input_tokens": count})


async def compact_conversation(request: Request) -> Response:
    req = parse_compact_request(await json_body(request))
    done = await until_disconnect(request.receive, _state(request).service.compact(req))
    if done is None:
        return Response(status_code=499)  # the client left: its model call was cancelled
    return JSONResponse(compacted_response(done))


async def get_response(request: Request) -> Response:
    state = _state(request)
    rid = request.path_params["response_id"]
    if request.query_params.get("stream") in ("true", "1"):
        after = request.query_params.get("starting_after")
        try:
            starting_after = int(after) if after is not None else None
        except ValueError:
            raise InvalidRequest("starting_after must be an integer.", param="starting_after") from None
        run = state.service.runs.get(rid)
        if run is not None and run.done.is_set() and run.background:  # deleted meanwhile (by any replica)?
            run = run if await state.service.store.get(rid) is not None else None
        if run is None:  # run elsewhere (another replica) or no longer in memory: from the store
            restreams = state.restreams
            assert restreams is not None
            await restreams.check(rid)  # 404 when unknown, 400 when not re-streamable
            return StreamingResponse(
                _stored_stream(restreams, rid, starting_after, state.keepalive_s),
                media_type="text/event-stream",
                headers=_SSE_HEADERS,
            )
        return StreamingResponse(
            _stream(run, starting_after, cancel_on_disconnect=False, keepalive_s=state.keepalive_s),
            media_type="text/event-stream",
            headers=_SSE_HEADERS,
        )
    return JSONResponse(await state.service.get(rid, _include_outputs(request)))


async def delete_response(request: Request) -> Response:
    rid = request.path_params["response_id"]
    await _state(request).service.delete(rid)
    return JSONResponse({"id": rid, "object": "response.deleted", "deleted": True})


async def cancel_response(request: Request) -> Response:
    return JSONResponse(await _state(request).service.cancel(request.path_params["response_id"]))


async def list_input_items(request: Request) -> Response:
    items = await _state(request).service.input_items(request.path_params["response_id"])
    return JSONResponse(cursor_page(items, request.query_params))


async def list_models(request: Request) -> Response:
    state = _state(request)
    created = int(state.started_at)
    return JSONResponse(
        {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "vllm-responses"}
                for name in state.service.model_names
            ],
        }
    )


class APIKeyMiddleware:
    """Plain ASGI middleware: `/v1/*` needs `Authorization: Bearer <key>` when a key is configured (HTTP, and
    WebSocket upgrades, refused before they are accepted)."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.api_key and scope["type"] in ("http", "websocket") and scope["path"].startswith("/v1/"):
            headers = dict(scope["headers"])
            given = headers.get(b"authorization", b"").decode("latin-1")
            token = given[7:] if given.lower().startswith("bearer ") else ""
            if not secrets.compare_digest(token.encode(), self.api_key.encode()):
                err = Unauthorized("Incorrect or missing API key: send 'Authorization: Bearer <key>'.")
                if scope["type"] == "websocket":
                    await deny_websocket(scope, receive, send, err)
                    return
                await JSONResponse(err.body(), status_code=err.status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


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


Opener = Callable[[Config], AbstractAsyncContextManager[tuple[Engine, Interpreter | None, ResponseStore]]]


class _App(Starlette):
    def build_middleware_stack(self) -> ASGIApp:
        # The request id outermost, so that even a 500 from Starlette's error middleware carries it.
        return RequestIdMiddleware(super().build_middleware_stack())


def _live_sources(state: AppState) -> LiveSources:
    """What /metrics reads at each scrape (admission: `AppState.admission` or `service.admission`)."""
    service, lifecycle = state.service, state.lifecycle
    return LiveSources(
        running=lambda: sum(not r.done.is_set() for r in list(service.runs.values())),
        engine_alive=lambda: service.engine.dead is None,
        draining=lambda: lifecycle.state in ("draining", "failed"),
        pool_stats=lambda: pool_stats(service.interpreter),
        admission=lambda: getattr(state, "admission", None) or getattr(service, "admission", None),
    )


def build_app(config: Config, open_components: Opener, *, lifecycle: Lifecycle | None = None) -> Starlette:
    """The app; `open_components` opens engine, sandbox pool and store for the lifespan and closes them.
    `lifecycle` (default: a new one, with no runner to stop) is how the runner drains and stops it."""
    life = lifecycle or Lifecycle(config.shutdown_grace)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_components(config) as (engine, interpreter, store):
            service = ResponsesService(config, engine, interpreter, store)
            await service.recover()  # background responses a crash left running: failed, not 404
            state = AppState(service, time.time(), life, keepalive_s=config.sse_keepalive)
            state.restreams = Restreams(store, config.restream_poll_interval)  # persisted events (issue 18)
            state.live = LiveCollector(_live_sources(state))
            app.state.vr = state
            life.attach(service.runs, engine, service.admission)
            try:
                yield
            finally:
                await life.detach()
                await service.aclose()

    routes = [
        *ops_routes(),
        Route("/v1/models", list_models),
        Route("/v1/responses", create_response, methods=["POST"]),
        WebSocketRoute("/v1/responses", responses_websocket),  # WebSocket mode (websocket.py)
        Route("/v1/responses/input_tokens", count_input_tokens, methods=["POST"]),
        Route("/v1/responses/compact", compact_conversation, methods=["POST"]),
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
        *container_routes(),
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
    app.add_middleware(ShutdownGate, lifecycle=life)
    app.add_middleware(  # bodies bounded while read (inside the key check: no body is read before it)
        BodyLimitMiddleware,
        max_request_bytes=config.max_request_bytes,
        max_upload_bytes=config.max_upload_bytes,
    )
    app.add_middleware(APIKeyMiddleware, api_key=config.api_key)
    app.state.lifecycle = life
    return app

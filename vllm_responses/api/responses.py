"""The `/v1/responses` routes: parse the request, call `ResponsesService`, answer in JSON or as an SSE stream.

SSE framing is here (`sse_frame`, one write per batch of ready events, keep-alive comments), and so is
`until_disconnect`, which gives up on a request's work when its HTTP client leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Receive

from vllm_responses.api.auth import principal_of
from vllm_responses.api.params import cursor_page, include_params, json_body
from vllm_responses.api.ratelimit import meter_of
from vllm_responses.api.state import app_state
from vllm_responses.api.websocket import responses_websocket
from vllm_responses.builder.core import usage_dict
from vllm_responses.context.compaction import Compaction
from vllm_responses.protocol.compaction import CompactedResponse, CompactRequest
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import public_item
from vllm_responses.protocol.requests import CreateResponseRequest, parse_create_request
from vllm_responses.runs.restream import Restreams
from vllm_responses.runs.run import Run

__all__ = ["SSE_KEEPALIVE", "response_routes", "sse_frame", "stored_sse_frame", "until_disconnect"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# An SSE comment: clients skip it; proxies with idle timeouts see bytes flowing (`--sse-keepalive`).
SSE_KEEPALIVE = b": keep-alive\n\n"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_frame(event: Event) -> bytes:
    """One SSE frame: `event:` line, one-line JSON `data:`, blank line, in a single write."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


def stored_sse_frame(kind: str, data: str) -> bytes:
    """`sse_frame` of a stored event: its type and its one-line JSON as kept (event_log.event_json)."""
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _sse(frames: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(frames, media_type="text/event-stream", headers=_SSE_HEADERS)


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


async def until_disconnect(receive: Receive, work: Awaitable[T]) -> T | None:
    """`work`'s result, unless the HTTP client disconnects first (an `http.disconnect` on the ASGI `receive`
    channel, whose body was read already): then `work` is cancelled and None is returned."""

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()  # the client is gone
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # ended otherwise all the same: retrieved, for nobody
    return None


async def create_response(request: Request) -> Response:
    """Streamed: headers, `response.created` and `response.in_progress` go out as soon as the response is
    admitted, or `response.created` (status `queued`) and `response.queued` as soon as it is queued, its
    `response.in_progress` when admitted (a 4xx before any of that for what the engine would refuse up
    front, a 429 when the queue is full too). A request waiting for admission leaves the queue when its
    client disconnects (its response is cancelled)."""
    state = app_state(request)
    req = parse_create_request(await json_body(request))
    principal = principal_of(request)
    work = state.service.create(req, project=principal.project, budget=meter_of(request))
    run = await until_disconnect(request.receive, work)
    if run is None:
        return Response(status_code=499)  # the client left while its request waited (nobody reads this)
    if req.stream:
        return _sse(
            _stream(run, None, cancel_on_disconnect=not req.background, keepalive_s=state.keepalive_s)
        )
    if req.background:  # acknowledged `queued`, as it was when kept
        return JSONResponse(run.acknowledgement or run.builder.snapshot())
    try:
        if await until_disconnect(request.receive, run.done.wait()) is None:
            logger.info("client left response %s before its end: cancelling it", run.id)
            run.cancel()
            return Response(status_code=499)
    except asyncio.CancelledError:
        run.cancel()
        raise
    failure = run.failure
    if failure is not None and not run.builder.output and (400 <= failure.status < 500 or run.unadmitted):
        raise failure  # refused before any output, or never admitted: an error, as before a stream starts
    return JSONResponse(await state.service.get(run.id, project=principal.project))


def _without_personality(body: dict[str, Any]) -> dict[str, Any]:
    """`personality` (a count's field, not a create's): checked, a string of at most 64 characters, then left
    out. The served models have no style presets, so it adds nothing to the prompt the count measures."""
    if "personality" not in body:
        return body
    value = body["personality"]
    if not isinstance(value, str):
        raise InvalidRequest(
            "Invalid type for 'personality': expected a string.", param="personality", code="invalid_type"
        )
    if not 0 < len(value) <= 64:
        raise InvalidRequest("Invalid 'personality': expected 1 to 64 characters.", param="personality")
    return {key: item for key, item in body.items() if key != "personality"}


async def count_input_tokens(request: Request) -> Response:
    state = app_state(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    # `model` and `input` are optional here; the rest is validated as for create.
    body = {**_without_personality(body), "model": body.get("model") or state.service.model_names[0]}
    if body.get("input") is None:
        body["input"] = []
    count = await until_disconnect(
        request.receive,
        state.service.count_input_tokens(parse_create_request(body), principal_of(request).project),
    )
    if count is None:
        return Response(status_code=499)  # the client left while its request waited (nobody reads this)
    return JSONResponse({"object": "response.input_tokens", "input_tokens": count})


async def compact_conversation(request: Request) -> Response:
    req = parse_compact_request(await json_body(request))
    meter = meter_of(request)
    settle = meter.reserve(1) if meter is not None else None  # a 429 once the key's minute is spent
    work = app_state(request).service.compact(req, principal_of(request).project)
    spent = 0
    try:
        done = await until_disconnect(request.receive, work)
        if done is None:
            return Response(status_code=499)  # the client left: its model call was cancelled
        spent = done.usage.input_tokens + done.usage.output_tokens
    finally:
        if settle is not None:
            settle(spent)  # its tokens count once it is done
    return JSONResponse(compacted_response(done))


def _starting_after(request: Request) -> int | None:
    after = request.query_params.get("starting_after")
    try:
        return int(after) if after is not None else None
    except ValueError:
        raise InvalidRequest("starting_after must be an integer.", param="starting_after") from None


async def get_response(request: Request) -> Response:
    state = app_state(request)
    rid, project = request.path_params["response_id"], principal_of(request).project
    if request.query_params.get("stream") not in ("true", "1"):
        return JSONResponse(await state.service.get(rid, include_params(request.query_params), project))
    starting_after = _starting_after(request)
    run = state.service.run_of(rid, project)
    if run is not None and run.done.is_set() and run.background:  # deleted meanwhile (by any replica)?
        run = run if await state.service.store.get(rid) is not None else None
    if run is None:  # run elsewhere (another replica) or no longer in memory: from the store
        if await state.service.stored_of(rid, project) is None:  # unknown, or another project's
            raise NotFound(f"Response with id {rid!r} not found.", param="response_id")
        await state.restreams.check(rid)  # 400 when not re-streamable
        return _sse(_stored_stream(state.restreams, rid, starting_after, state.keepalive_s))
    return _sse(_stream(run, starting_after, cancel_on_disconnect=False, keepalive_s=state.keepalive_s))


async def delete_response(request: Request) -> Response:
    rid = request.path_params["response_id"]
    await app_state(request).service.delete(rid, principal_of(request).project)
    return JSONResponse({"id": rid, "object": "response.deleted", "deleted": True})


async def cancel_response(request: Request) -> Response:
    rid, project = request.path_params["response_id"], principal_of(request).project
    return JSONResponse(await app_state(request).service.cancel(rid, project))


async def list_input_items(request: Request) -> Response:
    """The response's input items, listed as kept (`include` is checked: its values add nothing to input items,
    whose images keep their `image_url` and whose code calls their `outputs` as sent)."""
    include_params(request.query_params)  # an unknown value is a 400 naming `include[i]`
    rid, project = request.path_params["response_id"], principal_of(request).project
    items = await app_state(request).service.input_items(rid, project)
    return JSONResponse(cursor_page(items, request.query_params))


def response_routes() -> list[BaseRoute]:
    base = "/v1/responses"
    one = base + "/{response_id}"
    return [
        Route(base, create_response, methods=["POST"]),
        WebSocketRoute(base, responses_websocket),  # WebSocket mode (websocket.py)
        Route(base + "/input_tokens", count_input_tokens, methods=["POST"]),
        Route(base + "/compact", compact_conversation, methods=["POST"]),
        Route(one, get_response, methods=["GET"]),
        Route(one, delete_response, methods=["DELETE"]),
        Route(one + "/cancel", cancel_response, methods=["POST"]),
        Route(one + "/input_items", list_input_items, methods=["GET"]),
    ]


def compacted_response(done: Compaction) -> CompactedResponse:
    """The body of `POST /v1/responses/compact` (`CompactedResponse`)."""
    return {
        "id": new_id("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [public_item(it) for it in done.items],
        "usage": usage_dict(done.usage),
    }


def parse_compact_request(body: Any) -> CreateResponseRequest:
    """The compact body as the create request whose context it compacts: `CompactRequest`'s fields,
    validated as create validates them (a 400 naming the param); a missing `model`, or neither `input` nor
    `previous_response_id`, is a 400 naming it."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    if body.get("model") is None:
        raise InvalidRequest(
            "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
        )
    if not body.get("input") and not body.get("previous_response_id"):  # as OpenAI: nothing to compact
        raise InvalidRequest(
            "Missing required parameter: 'input' (or 'previous_response_id').",
            param="input",
            code="missing_required_parameter",
        )
    fields = {k: v for k, v in body.items() if k in CompactRequest.model_fields and v is not None}
    return parse_create_request({**fields, "input": body.get("input") or []})

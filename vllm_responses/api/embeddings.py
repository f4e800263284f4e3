"""The `/v1/embeddings` route: the body read and checked, the service's answer, a client gone cancels it."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vllm_responses.api.params import json_body
from vllm_responses.api.ratelimit import meter_of
from vllm_responses.api.responses import until_disconnect
from vllm_responses.api.state import app_state
from vllm_responses.executors import EMBEDDINGS, run_on
from vllm_responses.protocol.embeddings import parse_embedding_request

__all__ = ["embedding_routes"]

# Answers with more float values than this are written as JSON in a worker thread (2048 vectors of 384 floats
# take about 0.4 s: the event loop would stall every stream meanwhile).
INLINE_FLOATS = 16_384


def _render(body: dict[str, Any]) -> bytes:
    """`body` as Starlette's `JSONResponse` writes it."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


async def _answer(body: dict[str, Any]) -> Response:
    """`body` as JSON; a large list of float vectors rendered off the event loop."""
    data = body["data"]
    floats = sum(len(row["embedding"]) for row in data if isinstance(row["embedding"], list))
    if floats <= INLINE_FLOATS:
        return JSONResponse(body)
    return Response(await run_on(EMBEDDINGS, _render, body), media_type="application/json")


async def create_embeddings(request: Request) -> Response:
    req = parse_embedding_request(await json_body(request))
    work = app_state(request).embeddings.create(req, budget=meter_of(request))
    done = await until_disconnect(request.receive, work)
    if done is None:
        return Response(status_code=499)  # the client left: its inputs' embedding was cancelled
    return await _answer(done)


def embedding_routes() -> list[Route]:
    return [Route("/v1/embeddings", create_embeddings, methods=["POST"])]

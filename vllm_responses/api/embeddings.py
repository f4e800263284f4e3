"""The `/v1/embeddings` route: the body read and checked, the service's answer, a client gone cancels it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vllm_responses.api.params import json_body
from vllm_responses.api.ratelimit import meter_of
from vllm_responses.api.responses import until_disconnect
from vllm_responses.api.state import app_state
from vllm_responses.protocol.embeddings import parse_embedding_request

__all__ = ["embedding_routes"]


async def create_embeddings(request: Request) -> Response:
    req = parse_embedding_request(await json_body(request))
    work = app_state(request).embeddings.create(req, budget=meter_of(request))
    done = await until_disconnect(request.receive, work)
    if done is None:
        return Response(status_code=499)  # the client left: its inputs' embedding was cancelled
    return JSONResponse(done)


def embedding_routes() -> list[Route]:
    return [Route("/v1/embeddings", create_embeddings, methods=["POST"])]

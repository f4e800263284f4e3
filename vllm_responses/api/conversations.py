"""The `/v1/conversations` routes: parse the request, call `ConversationService`, serialize its answer."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vllm_responses.api.pagination import page_params
from vllm_responses.api.params import json_body
from vllm_responses.protocol.conversations import (
    ConversationDeleted,
    conversation_json,
    item_list,
    parse_items_and_metadata,
    parse_metadata_update,
    wire_conversation_item,
)
from vllm_responses.protocol.requests import check_includes
from vllm_responses.service.conversations import ConversationService
from vllm_responses.store.base import StoredConversation

__all__ = ["conversation_routes"]


def _service(request: Request) -> ConversationService:
    service: ConversationService = request.app.state.vr.service.conversations
    return service


def _json(conversation: StoredConversation) -> Response:
    return JSONResponse(conversation_json(conversation.id, conversation.created_at, conversation.metadata))


def _include_outputs(request: Request) -> bool:
    """Whether the query's `include` (`include[]=` as the SDK sends it) asks for code outputs."""
    include = request.query_params.getlist("include[]") + request.query_params.getlist("include")
    check_includes(include)
    return "code_interpreter_call.outputs" in include


async def create_conversation(request: Request) -> Response:
    items, metadata = parse_items_and_metadata(await json_body(request), items_required=False)
    return _json(await _service(request).create(items, metadata))


async def get_conversation(request: Request) -> Response:
    return _json(await _service(request).get(request.path_params["conversation_id"]))


async def update_conversation(request: Request) -> Response:
    metadata = parse_metadata_update(await json_body(request))
    return _json(await _service(request).update(request.path_params["conversation_id"], metadata))


async def delete_conversation(request: Request) -> Response:
    cid = request.path_params["conversation_id"]
    await _service(request).delete(cid)
    deleted: ConversationDeleted = {"id": cid, "object": "conversation.deleted", "deleted": True}
    return JSONResponse(deleted)


async def create_items(request: Request) -> Response:
    show = _include_outputs(request)
    items, _metadata = parse_items_and_metadata(await json_body(request), items_required=True)
    kept = await _service(request).add_items(request.path_params["conversation_id"], items)
    return JSONResponse(item_list([wire_conversation_item(it, show) for it in kept]))


async def list_items(request: Request) -> Response:
    show = _include_outputs(request)
    order, limit, after = page_params(request.query_params)
    page, has_more = await _service(request).page(
        request.path_params["conversation_id"], order=order, limit=limit, after=after
    )
    return JSONResponse(item_list([wire_conversation_item(it, show) for it in page], has_more))


async def get_item(request: Request) -> Response:
    show = _include_outputs(request)
    item = await _service(request).item(
        request.path_params["conversation_id"], request.path_params["item_id"]
    )
    return JSONResponse(wire_conversation_item(item, show))


async def delete_item(request: Request) -> Response:
    svc = _service(request)
    return _json(
        await svc.delete_item(request.path_params["conversation_id"], request.path_params["item_id"])
    )


def conversation_routes() -> list[Route]:
    base = "/v1/conversations"
    one = base + "/{conversation_id}"
    return [
        Route(base, create_conversation, methods=["POST"]),
        Route(one, get_conversation, methods=["GET"]),
        Route(one, update_conversation, methods=["POST"]),
        Route(one, delete_conversation, methods=["DELETE"]),
        Route(one + "/items", create_items, methods=["POST"]),
        Route(one + "/items", list_items, methods=["GET"]),
        Route(one + "/items/{item_id}", get_item, methods=["GET"]),
        Route(one + "/items/{item_id}", delete_item, methods=["DELETE"]),
    ]

"""The `/v1/conversations` routes: parse the request, call `ConversationService`, serialize its answer.

Adding items (a create with items, or `POST .../items`) is given up when the client leaves: the reading of its
files stops with it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vllm_responses.api.auth import principal_of
from vllm_responses.api.params import include_params, json_body, page_params
from vllm_responses.api.responses import until_disconnect
from vllm_responses.api.state import app_state
from vllm_responses.protocol.conversations import (
    ConversationDeleted,
    conversation_json,
    item_list,
    parse_items_and_metadata,
    parse_metadata_update,
    wire_conversation_item,
)
from vllm_responses.store.base import StoredConversation

__all__ = ["conversation_routes"]


def _json(conversation: StoredConversation) -> Response:
    return JSONResponse(conversation_json(conversation.id, conversation.created_at, conversation.metadata))


async def create_conversation(request: Request) -> Response:
    items, metadata = parse_items_and_metadata(await json_body(request), items_required=False)
    project = principal_of(request).project
    work = app_state(request).service.conversations.create(items, metadata, project)
    created = await until_disconnect(request.receive, work)
    return Response(status_code=499) if created is None else _json(created)


async def get_conversation(request: Request) -> Response:
    cid, project = request.path_params["conversation_id"], principal_of(request).project
    return _json(await app_state(request).service.conversations.get(cid, project))


async def update_conversation(request: Request) -> Response:
    metadata = parse_metadata_update(await json_body(request))
    return _json(
        await app_state(request).service.conversations.update(
            request.path_params["conversation_id"], metadata, principal_of(request).project
        )
    )


async def delete_conversation(request: Request) -> Response:
    cid = request.path_params["conversation_id"]
    await app_state(request).service.conversations.delete(cid, principal_of(request).project)
    deleted: ConversationDeleted = {"id": cid, "object": "conversation.deleted", "deleted": True}
    return JSONResponse(deleted)


async def create_items(request: Request) -> Response:
    show = include_params(request.query_params)
    items, _metadata = parse_items_and_metadata(await json_body(request), items_required=True)
    work = app_state(request).service.conversations.add_items(
        request.path_params["conversation_id"], items, principal_of(request).project
    )
    kept = await until_disconnect(request.receive, work)
    if kept is None:
        return Response(status_code=499)  # the client left (nobody reads this)
    return JSONResponse(item_list([wire_conversation_item(it, show) for it in kept]))


async def list_items(request: Request) -> Response:
    show = include_params(request.query_params)
    order, limit, after = page_params(request.query_params)
    page, has_more = await app_state(request).service.conversations.page(
        request.path_params["conversation_id"],
        principal_of(request).project,
        order=order,
        limit=limit,
        after=after,
    )
    return JSONResponse(item_list([wire_conversation_item(it, show) for it in page], has_more))


async def get_item(request: Request) -> Response:
    show = include_params(request.query_params)
    item = await app_state(request).service.conversations.item(
        request.path_params["conversation_id"], request.path_params["item_id"], principal_of(request).project
    )
    return JSONResponse(wire_conversation_item(item, show))


async def delete_item(request: Request) -> Response:
    svc = app_state(request).service.conversations
    return _json(
        await svc.delete_item(
            request.path_params["conversation_id"],
            request.path_params["item_id"],
            principal_of(request).project,
        )
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

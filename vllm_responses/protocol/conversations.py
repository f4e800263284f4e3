"""Wire shapes of `/v1/conversations`: the bodies we accept, and the conversation, item and list objects we send.

Items are read exactly as a create-response `input` is (same types, same checks, `items[i]...` in the 400's
`param`), and sent as the SDK's `ConversationItem`: `conversation_item` fills the fields that type requires
and an input item may leave out (a status, a text's annotations).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal, TypedDict, cast

from vllm_responses.protocol.configuration_items import CompactionTriggerInput
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.file_search_items import FILE_SEARCH_RESULTS_INCLUDE
from vllm_responses.protocol.inputs import InputItem
from vllm_responses.protocol.items import OutputItem, wire_item
from vllm_responses.protocol.requests import parse_create_request
from vllm_responses.protocol.web_search_options import includes_sources

__all__ = [
    "MAX_ITEMS_PER_REQUEST",
    "ConversationDeleted",
    "ConversationItemList",
    "ConversationObject",
    "conversation_item",
    "conversation_json",
    "item_list",
    "parse_items_and_metadata",
    "parse_metadata_update",
    "wire_conversation_item",
]

MAX_ITEMS_PER_REQUEST = 20  # as OpenAI: "You may add up to 20 items at a time."


class ConversationObject(TypedDict):
    """`openai.types.conversations.Conversation`"""

    id: str
    object: Literal["conversation"]
    created_at: int
    metadata: dict[str, str]


class ConversationItemList(TypedDict):
    """`openai.types.conversations.ConversationItemList` (`first_id`/`last_id` are strings there: "" when empty)."""

    object: Literal["list"]
    data: list[dict[str, Any]]
    first_id: str
    last_id: str
    has_more: bool


class ConversationDeleted(TypedDict):
    """`openai.types.conversations.ConversationDeletedResource`"""

    id: str
    object: Literal["conversation.deleted"]
    deleted: bool


def _body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    return body


def parse_items_and_metadata(
    body: Any, *, items_required: bool
) -> tuple[list[InputItem], dict[str, str] | None]:
    """The `items` and `metadata` of a create-conversation (or add-items) body, checked as a response's
    `input` and `metadata` are; a 400 naming `items[i]...` or `metadata` otherwise."""
    body = _body(body)
    items = body.get("items")
    if items is None and items_required:
        raise InvalidRequest(
            "Missing required parameter: 'items'.", param="items", code="missing_required_parameter"
        )
    if items is not None and not isinstance(items, list):
        raise InvalidRequest("'items' must be a list of input items.", param="items")
    if items is not None and len(items) > MAX_ITEMS_PER_REQUEST:
        raise InvalidRequest(f"At most {MAX_ITEMS_PER_REQUEST} items may be added at a time.", param="items")
    try:
        req = parse_create_request({"model": "-", "input": items or [], "metadata": body.get("metadata")})
    except InvalidRequest as exc:
        param = exc.param or ""
        if not param.startswith("input"):
            raise
        renamed = "items" + param.removeprefix("input")
        message = exc.message.replace(param, renamed).replace("Input item", "Item")
        raise InvalidRequest(message, param=renamed, code=exc.code) from None
    assert isinstance(req.input, list)
    for i, item in enumerate(req.input):
        if isinstance(item, CompactionTriggerInput):  # a request to a response, no conversation item
            raise InvalidRequest(
                "A compaction_trigger is not a conversation item: give it as a response's last input item.",
                param=f"items[{i}].type",
                code="unsupported_value",
            )
    return req.input, req.metadata


def parse_metadata_update(body: Any) -> dict[str, str]:
    """The `metadata` of an update body (required; null clears it)."""
    body = _body(body)
    if "metadata" not in body:
        raise InvalidRequest(
            "Missing required parameter: 'metadata'.", param="metadata", code="missing_required_parameter"
        )
    _items, metadata = parse_items_and_metadata({"metadata": body["metadata"]}, items_required=False)
    return metadata or {}


def conversation_json(
    conversation_id: str, created_at: float, metadata: dict[str, str]
) -> ConversationObject:
    return {
        "id": conversation_id,
        "object": "conversation",
        "created_at": int(created_at),
        "metadata": metadata,
    }


_STATUS_REQUIRED = ("message", "function_call", "function_call_output", "code_interpreter_call")


def conversation_item(item: dict[str, Any]) -> dict[str, Any]:
    """An item as a conversation keeps it: a status where the SDK's `ConversationItem` requires one, and
    `annotations` on every output text."""
    out = dict(item)
    if out.get("type") in _STATUS_REQUIRED:
        out.setdefault("status", "completed")
    if out.get("type") == "message" and isinstance(out.get("content"), list):
        out["content"] = [
            {**part, "annotations": part.get("annotations", [])}
            if part.get("type") == "output_text"
            else part
            for part in out["content"]
        ]
    return out


def wire_conversation_item(item: dict[str, Any], include: Collection[str]) -> dict[str, Any]:
    """A kept item as it goes out: code outputs and search sources only where `include` asks for them (the
    rules of `items.wire_item`)."""
    shown = wire_item(
        cast(OutputItem, item),
        "code_interpreter_call.outputs" in include,
        includes_sources(include),
        FILE_SEARCH_RESULTS_INCLUDE in include,
    )
    return cast(dict[str, Any], shown)


def item_list(items: list[dict[str, Any]], has_more: bool = False) -> ConversationItemList:
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else "",
        "last_id": items[-1]["id"] if items else "",
        "has_more": has_more,
    }

"""Input items that lean on stored ones: `item_reference`s resolved, code calls sent without outputs completed."""

from __future__ import annotations

from typing import Any

from vllm_responses.errors import NotFound
from vllm_responses.store import ResponseStore

__all__ = ["resolve_stored_items"]


async def resolve_stored_items(
    store: ResponseStore, items: list[dict[str, Any]], param: str
) -> list[dict[str, Any]]:
    """`items` with each `item_reference` replaced by the stored item it names (the Vercel AI SDK sends these;
    an unknown id is a 404 naming `{param}[i].id`), and each `code_interpreter_call` sent without `outputs`
    given those of the stored call with its id: a client that resends a response's items without having
    asked for `include=["code_interpreter_call.outputs"]` (openai-agents does) still lets the model see
    what its code printed."""
    resolved = []
    for i, item in enumerate(items):
        if item.get("type") == "item_reference":
            found = await store.find_item(item["id"])
            if found is None:
                raise NotFound(f"Item with id {item['id']!r} not found.", param=f"{param}[{i}].id")
            item = found
        elif item.get("type") == "code_interpreter_call" and item.get("outputs") is None:
            found = await store.find_item(item["id"])
            if found is not None and found.get("type") == "code_interpreter_call":
                item = {**item, "outputs": found.get("outputs")}
        resolved.append(item)
    return resolved

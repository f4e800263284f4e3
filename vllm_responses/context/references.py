"""Input items that lean on stored ones: `item_reference`s resolved, code calls sent without outputs completed, web
and file searches given the results the server kept, and each function call output checked against the calls it may
answer."""

from __future__ import annotations

from typing import Any

from vllm_responses.context.reasoning import Opener, client_reasoning
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.items import SEARCH_RESULTS, public_item
from vllm_responses.store.base import DEFAULT_PROJECT, ResponseStore

__all__ = ["check_call_outputs", "resolve_stored_items"]


async def resolve_stored_items(
    store: ResponseStore,
    items: list[dict[str, Any]],
    param: str,
    project: str = DEFAULT_PROJECT,
    open_sealed: Opener | None = None,
    local: ResponseStore | None = None,
) -> list[dict[str, Any]]:
    """`items` with each `item_reference` replaced by the stored item it names (the Vercel AI SDK sends these;
    an unknown id is a 404 naming `{param}[i].id`), and each `code_interpreter_call` sent without `outputs`
    given those of the stored call with its id: a client that resends a response's items without having
    asked for `include=["code_interpreter_call.outputs"]` (openai-agents does) still lets the model see
    what its code printed; each `web_search_call` given the results the server kept of it (`_kept_search`), and
    each `file_search_call` sent without `results` those of the stored call with its id.
    Only the items of `project`'s responses are found, in `local` (a WebSocket connection's cache, whose
    `store: false` responses the store does not hold) first, then in `store`. A reasoning item is kept as
    `client_reasoning` makes it (`open_sealed` opens its sealed copy for `project`)."""
    finder = _Finder(store, local, project)
    resolved = []
    for i, item in enumerate(items):
        if item.get("type") == "item_reference":
            found = await finder.find(item["id"])
            if found is None:
                raise NotFound(f"Item with id {item['id']!r} not found.", param=f"{param}[{i}].id")
            item = found
        elif item.get("type") == "reasoning":
            sealed = item.get("encrypted_content") and open_sealed is not None
            kept = await finder.find(item["id"]) if item.get("id") and not sealed else None
            item = client_reasoning(item, kept, open_sealed, f"{param}[{i}]")
        elif item.get("type") == "web_search_call":
            item = await _kept_search(finder, item)
        elif item.get("type") == "file_search_call" and item.get("results") is None:
            found = await finder.find(str(item.get("id")))
            if found is not None and found.get("type") == "file_search_call":
                item = {**item, "results": found.get("results")}
        elif item.get("type") == "code_interpreter_call" and item.get("outputs") is None:
            found = await finder.find(item["id"])
            if found is not None and found.get("type") == "code_interpreter_call":
                item = {**item, "outputs": found.get("outputs")}
        resolved.append(item)
    return resolved


class _Finder:
    """Finds a kept item of `project` by its id: in `local` first (when given), then in `store`."""

    def __init__(self, store: ResponseStore, local: ResponseStore | None, project: str) -> None:
        self.stores = [s for s in (local, store) if s is not None]
        self.project = project

    async def find(self, item_id: str) -> dict[str, Any] | None:
        for store in self.stores:
            if (found := await store.find_item(item_id, self.project)) is not None:
                return found
        return None


async def _kept_search(finder: _Finder, item: dict[str, Any]) -> dict[str, Any]:
    """A `web_search_call` given back, with the results the model read of it when the server kept them (under
    its id): only the server's own copy says what a search found, never the client's word."""
    item = public_item(item)
    found = await finder.find(item["id"])
    if found is not None and found.get("type") == "web_search_call" and SEARCH_RESULTS in found:
        item = {**item, SEARCH_RESULTS: found[SEARCH_RESULTS]}
    return item


# Each kind of call output, the kind of call it answers, and how OpenAI's message names it.
_ANSWERS = {
    "function_call_output": ("function_call", "function"),
    "custom_tool_call_output": ("custom_tool_call", "custom tool"),
    "shell_call_output": ("shell_call", "shell"),
    "local_shell_call_output": ("local_shell_call", "local shell"),
    "apply_patch_call_output": ("apply_patch_call", "apply_patch"),
    "tool_search_output": ("tool_search_call", "tool search"),
}


def check_call_outputs(history: list[dict[str, Any]], items: list[dict[str, Any]]) -> None:
    """Each call output among the input `items` (`function_call_output`, `custom_tool_call_output`, and the
    coding tools' `shell_call_output`, ...) must answer a call of its kind in the history (previous response or
    conversation) or in the input: a 400 otherwise, worded and placed as OpenAI's. A `local_shell_call_output`
    names its call by `call_id` (openai-agents) or, as the SDK types it, `id`."""
    calls = {(it.get("type"), it.get("call_id")) for it in [*history, *items]}
    for i, item in enumerate(items):
        answered = _ANSWERS.get(str(item.get("type")))
        if answered is None:
            continue
        kind, words = answered
        call_id = item.get("call_id") or (item.get("id") if kind == "local_shell_call" else None)
        if kind == "tool_search_call" and call_id is None:  # an output that names no call (the SDK allows it)
            continue
        if (kind, call_id) not in calls:
            raise InvalidRequest(
                f"No tool call found for {words} call output with call_id {call_id} (input[{i}]).",
                param="input",
            )

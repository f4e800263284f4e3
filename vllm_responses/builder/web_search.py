"""The builder's web search steps: a `web_search_call` item added, searching, and ended with what was read."""

from __future__ import annotations

from typing import Any, cast

from vllm_responses.builder import events as ev
from vllm_responses.builder.core import ResponseState
from vllm_responses.builder.text import OpenText
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import SEARCH_RESULTS, SearchActionType, WebSearchCallItem

__all__ = ["WebSearchSteps"]


class WebSearchSteps:
    """One method per step of a web search call (run by the server); each returns the events of its step."""

    def __init__(self, state: ResponseState, text: OpenText) -> None:
        self.state = state
        self.text = text

    def start(self, action: SearchActionType = "search") -> tuple[int, list[Event]]:
        """A web search call begins: its item added with an `action` of that type, its fields empty until the
        call's arguments are read (`searching`)."""
        new: WebSearchCallItem = {
            "id": new_id("ws"),
            "type": "web_search_call",
            "status": "in_progress",
            "action": _empty_action(action),
        }
        index, events = self.text.start_item(new)
        ref = self.state.ref(index)
        return index, [
            *events,
            ev.web_search_event("response.web_search_call.in_progress", self.state.seq(), ref),
        ]

    def searching(self, index: int, action: dict[str, Any]) -> list[Event]:
        """The call's `action` read from its arguments (a search's `query`, a page's `url` and `pattern`)."""
        item = self.state.web_search_call(index)
        item["status"] = "searching"
        item["action"] = dict(action)
        return [
            ev.web_search_event("response.web_search_call.searching", self.state.seq(), self.state.ref(index))
        ]

    def done(
        self, index: int, sources: list[str] | None, results: str, *, failed: bool = False
    ) -> list[Event]:
        """The search ended: its item `completed` (with `action.sources` when the client asked for them) or
        `failed`; `results`, what the model read of it, kept on the server's copy of the item (`SEARCH_RESULTS`,
        never sent)."""
        state = self.state
        item = state.web_search_call(index)
        item["status"] = "failed" if failed else "completed"
        cast(dict[str, Any], item)[SEARCH_RESULTS] = results
        if sources is not None:
            item["action"]["sources"] = [{"type": "url", "url": url} for url in sources]
        events: list[Event] = []
        if not failed:
            events.append(
                ev.web_search_event("response.web_search_call.completed", state.seq(), state.ref(index))
            )
        return [*events, state.item_done(index)]


def _empty_action(action: SearchActionType) -> dict[str, Any]:
    """A web search call's `action` before its arguments are read: its type, its required fields empty."""
    if action == "search":
        return {"type": "search", "query": ""}
    if action == "open_page":
        return {"type": "open_page", "url": ""}
    return {"type": "find_in_page", "url": "", "pattern": ""}

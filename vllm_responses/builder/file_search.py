"""The builder's file search steps: a `file_search_call` item added, searching, and ended with its results."""

from __future__ import annotations

from vllm_responses.builder import events as ev
from vllm_responses.builder.citations import FoundFile
from vllm_responses.builder.core import ResponseState
from vllm_responses.builder.text import OpenText
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import FileSearchCallItem, FileSearchResult

__all__ = ["FileSearchSteps"]


class FileSearchSteps:
    """One method per step of a file search call; each returns the events of its step."""

    def __init__(self, state: ResponseState, text: OpenText) -> None:
        self.state = state
        self.text = text

    def start(self) -> tuple[int, list[Event]]:
        """The call begins: its item added (no queries yet), then `in_progress`."""
        new: FileSearchCallItem = {
            "id": new_id("fs"),
            "type": "file_search_call",
            "queries": [],
            "status": "in_progress",
            "results": None,
        }
        index, events = self.text.start_item(new)
        ref = self.state.ref(index)
        return index, [
            *events,
            ev.file_search_event("response.file_search_call.in_progress", self.state.seq(), ref),
        ]

    def searching(self, index: int, queries: list[str]) -> list[Event]:
        """The call's queries read from its arguments: `searching`."""
        item = self.state.file_search_call(index)
        item["status"] = "searching"
        item["queries"] = list(queries)
        ref = self.state.ref(index)
        return [ev.file_search_event("response.file_search_call.searching", self.state.seq(), ref)]

    def done(self, index: int, results: list[FileSearchResult] | None) -> list[Event]:
        """The search ended: `completed` with its `results` (kept; on the wire where the client asks for them,
        and their files cited where a later message names them), or `failed` (None)."""
        state = self.state
        item = state.file_search_call(index)
        item["status"] = "failed" if results is None else "completed"
        item["results"] = results
        if results is None:
            return [state.item_done(index)]
        state.found_files += [FoundFile(r["file_id"], r["filename"]) for r in results]
        completed = ev.file_search_event("response.file_search_call.completed", state.seq(), state.ref(index))
        return [completed, state.item_done(index)]

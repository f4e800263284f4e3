"""The response event builder: pure, synchronous, and the only place that numbers events and output items.

`ResponseBuilder` holds one response's state (`core.ResponseState`: its output items, usage, status) and
its lifecycle (created, queued, completed, incomplete, failed, cancelled). The steps of the items between
live in parts, each reached directly as an attribute of the builder: `text` (`text.py`: message and
reasoning text), `calls` (`call_items.py`: function, custom, coding-tool, tool search and code calls),
`web_search` (`web_search.py`), `file_search` (`file_search.py`) and `mcp` (`mcp.py`: remote MCP). Each step
returns the Responses API stream events for it (made by `events.py`, typed in `protocol/events.py`), already
carrying their final `sequence_number`, `output_index`, `item_id` and `content_index`. `snapshot()` gives
the response object those events describe, so the streamed and the stored/non-streamed forms cannot drift
apart. Items always keep their full code-interpreter `outputs` internally; `protocol.items.wire_item`
blanks them on the way out. The builder knows nothing of HTTP: why a response failed is its caller's
business (`errors.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from vllm_responses.builder import events as ev
from vllm_responses.builder.call_items import CallSteps
from vllm_responses.builder.citations import WebSource, WrittenFile
from vllm_responses.builder.core import ResponseState
from vllm_responses.builder.file_search import FileSearchSteps
from vllm_responses.builder.mcp import McpSteps
from vllm_responses.builder.text import OpenText
from vllm_responses.builder.web_search import WebSearchSteps
from vllm_responses.engine.types import Usage
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    CompactionItem,
    OutputItem,
    ResponseEcho,
    ResponseError,
    ResponseObject,
)
from vllm_responses.protocol.status import END_EVENTS, ResponseStatus

__all__ = ["ResponseBuilder"]


class ResponseBuilder:
    """Builds the events and the snapshot of one response: its lifecycle here, its items' steps in its parts.

    Parameters
    ----------
    base, include_outputs, include_reasoning, seal, include_sources, include_results, summary: as `ResponseState`
    takes them
    (`include_reasoning` needs a `seal`).
    response_id: the response's id; a new one when None.
    """

    def __init__(
        self,
        base: ResponseEcho,
        *,
        include_outputs: bool,
        include_reasoning: bool = False,
        response_id: str | None = None,
        seal: Callable[[str], str] | None = None,
        include_sources: bool = False,
        include_results: bool = False,
        summary: str | None = None,
    ) -> None:
        if include_reasoning and seal is None:
            raise ValueError("include_reasoning needs a seal")
        self.state = ResponseState(
            base,
            include_outputs=include_outputs,
            include_reasoning=include_reasoning,
            seal=seal,
            include_sources=include_sources,
            include_results=include_results,
            summary=summary,
            id=response_id or new_id("resp"),
        )
        # the steps, each reached directly: `builder.text.text_delta(...)`, `builder.calls.code_start(...)`
        self.text = OpenText(self.state)
        self.calls = CallSteps(self.state, self.text)
        self.web_search = WebSearchSteps(self.state, self.text)
        self.file_search = FileSearchSteps(self.state, self.text)
        self.mcp = McpSteps(self.state, self.text)

    # --- the response as it stands ------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.state.id

    @property
    def base(self) -> ResponseEcho:
        return self.state.base

    @property
    def status(self) -> ResponseStatus:
        return self.state.status

    @property
    def output(self) -> list[OutputItem]:
        return self.state.output

    @property
    def usage(self) -> Usage:
        return self.state.usage

    @property
    def error(self) -> ResponseError | None:
        return self.state.error

    def snapshot(
        self,
        *,
        include_outputs: bool | None = None,
        include_sources: bool | None = None,
        include_results: bool | None = None,
    ) -> ResponseObject:
        """The response object as it stands now."""
        return self.state.snapshot(
            include_outputs=include_outputs, include_sources=include_sources, include_results=include_results
        )

    def note_sources(self, sources: list[WebSource]) -> None:
        """Web search results the model was shown (cited where a later message mentions their URL)."""
        self.state.sources += sources

    def note_files(self, files: list[WrittenFile]) -> None:
        """Files code wrote during this response (a file written again replaces its earlier entry)."""
        ids = {f.file_id for f in files}
        self.state.files = [f for f in self.state.files if f.file_id not in ids] + files

    # --- lifecycle ------------------------------------------------------------------------------------

    def queued(self) -> list[Event]:
        """The opening of a response that waits for admission: created (status `queued`), then queued."""
        self.state.status = ResponseStatus.QUEUED
        return [self.state.lifecycle("response.created"), self.state.lifecycle("response.queued")]

    def created(self) -> list[Event]:
        """The response starts: created and in_progress, or only in_progress when `queued` opened it."""
        if self.state.status == ResponseStatus.QUEUED:
            self.state.status = ResponseStatus.IN_PROGRESS
            return [self.state.lifecycle("response.in_progress")]
        return [self.state.lifecycle("response.created"), self.state.lifecycle("response.in_progress")]

    def compaction(self, item: CompactionItem) -> list[Event]:
        """The compaction item of a context compacted before the first model call (`context_management`, a
        `compaction_trigger`): added, compacting and done at once, ahead of the rest of the output, so a
        stateless client can send it back."""
        index, added = self.state.add(item)
        compacting = ev.compaction_compacting(self.state.seq(), self.state.ref(index))
        return [added, compacting, self.state.item_done(index)]

    def completed(self, usage: Usage) -> list[Event]:
        return self._finish(ResponseStatus.COMPLETED, usage)

    def incomplete(self, reason: str, usage: Usage) -> list[Event]:
        events = self.text.close("incomplete", final=True)
        self.state.incomplete_reason = reason
        return events + self._finish(ResponseStatus.INCOMPLETE, usage)

    def failed(self, message: str, usage: Usage, code: str = "server_error") -> list[Event]:
        """End the response as failed: its open items ended as they stand, then `response.failed`."""
        events = self.text.close("incomplete")
        for index in range(len(self.state.output)):
            events += self._end_unfinished(index)
        self.state.error = {"code": code, "message": message}
        return events + self._finish(ResponseStatus.FAILED, usage)

    def cancelled(self, usage: Usage) -> None:
        """Mark the response cancelled (no event: the stream that would carry it is gone)."""
        self.state.usage = usage
        self.state.status = ResponseStatus.CANCELLED
        self.state.completed_at = int(time.time())

    def _finish(self, status: ResponseStatus, usage: Usage) -> list[Event]:
        events = self.text.close(final=True)
        self.state.usage = usage
        self.state.status = status
        self.state.completed_at = int(time.time())
        return [*events, self.state.lifecycle(END_EVENTS[status])]

    def _end_unfinished(self, index: int) -> list[Event]:
        """The item at `index` ended, if it was still running when the response failed: a code call as
        failed, another item with a status as incomplete, one with none as it stands."""
        item = self.state.output[index]
        if item["type"] == "compaction":
            return []  # finished when added
        if (
            item["type"] == "custom_tool_call"
            or item["type"] == "mcp_list_tools"
            or item["type"] == "mcp_approval_request"
        ):
            if index not in self.state.open_statusless:
                return []
            self.state.open_statusless.discard(index)
        elif item["type"] == "code_interpreter_call":
            if item["status"] not in ("in_progress", "interpreting"):
                return []
            item["status"] = "failed"
        elif item["type"] == "apply_patch_call":  # added whole when its call ends: never left open
            return []
        elif item["type"] == "web_search_call" or item["type"] == "file_search_call":
            if item["status"] not in ("in_progress", "searching"):
                return []
            item["status"] = "incomplete"
        elif item["status"] == "in_progress":
            item["status"] = "incomplete"
        else:
            return []
        return [self.state.item_done(index)]

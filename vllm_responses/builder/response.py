"""The response event builder: pure, synchronous, and the only place that numbers events and output items.

`ResponseBuilder` holds one response's state (`core.ResponseState`: its output items, usage, status). Each
method takes one step of the response's life (text arrived, a code call started, ...) and returns the
Responses API stream events for it (made by `events.py`, typed in `protocol/events.py`), already carrying
their final `sequence_number`, `output_index`, `item_id` and `content_index`. `snapshot()` gives the
response object those events describe, so the streamed and the stored/non-streamed forms cannot drift
apart. Items always keep their full code-interpreter `outputs` internally; `protocol.items.wire_item`
blanks them on the way out. The builder knows nothing of HTTP: why a response failed is its caller's
business (`errors.py`). The steps live in parts: `text.py` (message and reasoning text), `call_items.py`
(function, custom and code calls), `file_search.py` (file searches) and `mcp.py` (remote MCP); this class is
the lifecycle and their face.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from vllm_responses.builder import events as ev
from vllm_responses.builder.call_items import CallSteps
from vllm_responses.builder.citations import WebSource, WrittenFile
from vllm_responses.builder.core import ResponseState
from vllm_responses.builder.file_search import FileSearchSteps
from vllm_responses.builder.mcp import McpSteps
from vllm_responses.builder.text import OpenText
from vllm_responses.engine.types import TokenLogprob, Usage
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    CodeInterpreterCallItem,
    CodeOutput,
    CodingCallItem,
    CompactionItem,
    FileSearchCallItem,
    FileSearchResult,
    McpCallItem,
    McpListToolsTool,
    OutputItem,
    ResponseEcho,
    ResponseError,
    ResponseObject,
    SearchActionType,
    ShellCallItem,
    WebSearchCallItem,
)
from vllm_responses.protocol.status import END_EVENTS, ResponseStatus

__all__ = ["ResponseBuilder"]


class ResponseBuilder:
    """Builds the events and the snapshot of one response: one method per step of its life.

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
        self._text = OpenText(self.state)
        self._calls = CallSteps(self.state, self._text)
        self._mcp = McpSteps(self.state, self._text)
        self._file_search = FileSearchSteps(self.state, self._text)

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

    def close_open(self, *, final: bool = False) -> list[Event]:
        """Finish an open message or reasoning item as completed (`OpenText.close`)."""
        return self._text.close(final=final)

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
        events = self._text.close("incomplete", final=True)
        self.state.incomplete_reason = reason
        return events + self._finish(ResponseStatus.INCOMPLETE, usage)

    def failed(self, message: str, usage: Usage, code: str = "server_error") -> list[Event]:
        """End the response as failed: its open items ended as they stand, then `response.failed`."""
        events = self._text.close("incomplete")
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
        events = self._text.close(final=True)
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

    # --- message and reasoning text (text.py) ---------------------------------------------------------

    def text_delta(self, text: str, logprobs: Sequence[TokenLogprob] = ()) -> list[Event]:
        return self._text.text_delta(text, logprobs)

    def reasoning_delta(self, text: str) -> list[Event]:
        return self._text.reasoning_delta(text)

    def unsummarised_reasoning(self) -> str | None:
        """The open reasoning's text when a `concise` summary of it is still to be given (`summarise`)."""
        return self._text.unsummarised()

    def summarise(self, text: str) -> None:
        """Give the open reasoning item its `concise` summary, written apart from it (out as the item closes)."""
        self._text.summarise(text)

    # --- function, custom and code calls (call_items.py) ----------------------------------------------

    def function_call_start(self, name: str, namespace: str | None = None) -> tuple[int, list[Event]]:
        return self._calls.function_call_start(name, namespace)

    def function_call_delta(self, index: int, delta: str) -> list[Event]:
        return self._calls.function_call_delta(index, delta)

    def function_call_done(self, index: int, arguments: str | None = None) -> list[Event]:
        return self._calls.function_call_done(index, arguments)

    def custom_call_start(self, name: str, namespace: str | None = None) -> tuple[int, list[Event]]:
        return self._calls.custom_call_start(name, namespace)

    def coding_call(self, item: CodingCallItem) -> tuple[int, list[Event]]:
        return self._calls.coding_call(item)

    def tool_search(
        self, arguments: Any, tools: list[dict[str, Any]] | None, *, execution: Literal["server", "client"]
    ) -> tuple[str, list[Event]]:
        """A tool search call (and, run by the server, the `tool_search_output` of what it found): its
        `call_id` and events."""
        call_id, events = self._calls.tool_search_call(arguments, execution)
        if tools is not None:
            events += self._calls.tool_search_output(call_id, tools)
        return call_id, events

    def web_search_item(self, index: int) -> WebSearchCallItem:
        return self.state.web_search_call(index)

    def web_search_start(self, action: SearchActionType = "search") -> tuple[int, list[Event]]:
        return self._calls.web_search_start(action)

    def web_search_searching(self, index: int, action: dict[str, Any]) -> list[Event]:
        return self._calls.web_search_searching(index, action)

    def web_search_done(
        self, index: int, sources: list[str] | None, results: str, *, failed: bool = False
    ) -> list[Event]:
        return self._calls.web_search_done(index, sources, results, failed=failed)

    def note_sources(self, sources: list[WebSource]) -> None:
        """Web search results the model was shown (cited where a later message mentions their URL)."""
        self.state.sources += sources

    # --- file search calls (file_search.py) --------------------------------------------------------------

    def file_search_item(self, index: int) -> FileSearchCallItem:
        return self.state.file_search_call(index)

    def file_search_start(self) -> tuple[int, list[Event]]:
        return self._file_search.start()

    def file_search_searching(self, index: int, queries: list[str]) -> list[Event]:
        return self._file_search.searching(index, queries)

    def file_search_done(self, index: int, results: list[FileSearchResult] | None) -> list[Event]:
        """The search ended: completed with its results, or failed (None)."""
        return self._file_search.done(index, results)

    def custom_call_delta(self, index: int, delta: str) -> list[Event]:
        return self._calls.custom_call_delta(index, delta)

    def custom_call_done(self, index: int) -> list[Event]:
        return self._calls.custom_call_done(index)

    def shell_call_start(self) -> tuple[int, list[Event]]:
        return self._calls.shell_call_start()

    def shell_command(self, index: int, command_index: int, delta: str, *, closed: bool) -> list[Event]:
        return self._calls.shell_command(index, command_index, delta, closed=closed)

    def shell_call_done(self, index: int, item: ShellCallItem, closed: int) -> list[Event]:
        return self._calls.shell_call_done(index, item, closed)

    def code_item(self, index: int) -> CodeInterpreterCallItem:
        return self.state.code_call(index)

    def code_start(self, container_id: str) -> tuple[int, list[Event]]:
        return self._calls.code_start(container_id)

    def code_delta(self, index: int, delta: str) -> list[Event]:
        return self._calls.code_delta(index, delta)

    def code_done(self, index: int) -> list[Event]:
        return self._calls.code_done(index)

    def code_finished(self, index: int, outputs: list[CodeOutput], *, failed: bool = False) -> list[Event]:
        return self._calls.code_finished(index, outputs, failed=failed)

    # --- remote MCP (mcp.py) --------------------------------------------------------------------------

    def mcp_list_start(self, server_label: str) -> tuple[int, list[Event]]:
        return self._mcp.list_start(server_label)

    def mcp_list_done(self, index: int, tools: list[McpListToolsTool], error: str | None) -> list[Event]:
        return self._mcp.list_done(index, tools, error)

    def mcp_call_item(self, index: int) -> McpCallItem:
        return self.state.mcp_call(index)

    def mcp_call_start(
        self, server_label: str, name: str, approval_request_id: str | None = None
    ) -> tuple[int, list[Event]]:
        return self._mcp.call_start(server_label, name, approval_request_id)

    def mcp_call_delta(self, index: int, delta: str) -> list[Event]:
        return self._mcp.call_delta(index, delta)

    def mcp_call_arguments_done(self, index: int, arguments: str) -> list[Event]:
        return self._mcp.call_arguments_done(index, arguments)

    def mcp_call_finished(self, index: int, output: str | None, error: dict[str, Any] | None) -> list[Event]:
        """The call ran: its `output`, or its `error` (then the call failed)."""
        return self._mcp.call_finished(index, output, error)

    def mcp_approval_start(self, server_label: str, name: str) -> tuple[int, list[Event]]:
        return self._mcp.approval_start(server_label, name)

    def mcp_approval_done(self, index: int, arguments: str) -> list[Event]:
        return self._mcp.approval_done(index, arguments)

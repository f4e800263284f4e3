"""One response's state as the builder keeps it: its fields, output items, event numbering and snapshot."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vllm_responses.builder import events as ev
from vllm_responses.builder.citations import FoundFile, WebSource, WrittenFile
from vllm_responses.engine.types import Usage
from vllm_responses.protocol.events import (
    ItemRef,
    LifecycleType,
    OutputItemAdded,
    OutputItemDone,
    PartRef,
    ResponseLifecycle,
)
from vllm_responses.protocol.items import (
    CodeInterpreterCallItem,
    CustomToolCallItem,
    FileSearchCallItem,
    FunctionCallItem,
    McpCallItem,
    MessageItem,
    OutputItem,
    ReasoningItem,
    ResponseEcho,
    ResponseError,
    ResponseObject,
    ResponseUsage,
    WebSearchCallItem,
    wire_item,
    wire_items,
)
from vllm_responses.protocol.status import TERMINAL, ResponseStatus

__all__ = ["ResponseState", "usage_dict"]


def usage_dict(u: Usage) -> ResponseUsage:
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


@dataclass(eq=False)
class ResponseState:
    """One response as it is built, and the bookkeeping every one of its events goes through.

    Parameters
    ----------
    base: the response fields echoed from the request (model, tools, tool_choice, instructions, ...).
    include_outputs: whether code-interpreter `outputs` go out on the wire.
    include_reasoning: whether finished reasoning items carry `encrypted_content` (include
        "reasoning.encrypted_content"): an opaque copy of the reasoning a stateless client sends back.
    id: the response's id.
    seal: seals a finished reasoning item's text into its `encrypted_content` (store/sealing.py).
    include_sources: whether a web search's `action.sources` go out on the wire (items keep them).
    include_results: whether a file search's `results` go out on the wire (items keep them).
    summary: `reasoning.summary` (auto, concise, detailed): what a reasoning item's summary is (summary.py);
        None: reasoning items have none.
    """

    base: ResponseEcho
    include_outputs: bool
    include_reasoning: bool
    id: str
    seal: Callable[[str], str] | None = None
    include_sources: bool = False
    include_results: bool = False
    summary: str | None = None
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: ResponseStatus = ResponseStatus.IN_PROGRESS
    output: list[OutputItem] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: ResponseError | None = None
    incomplete_reason: str | None = None
    completed_at: int | None = None
    # Files the response's code wrote (cited in messages, see citations.py) and the ids cited so far.
    files: list[WrittenFile] = field(default_factory=list)
    cited: set[str] = field(default_factory=set)
    # The web search results the model was shown (cited where a message mentions their URL).
    sources: list[WebSource] = field(default_factory=list)
    # The files whose chunks a file search showed the model (cited where a message names their file id).
    found_files: list[FoundFile] = field(default_factory=list)
    # output_index of the items with no status still open (custom tool calls, MCP listings and approvals)
    open_statusless: set[int] = field(default_factory=set)
    numbered: int = 0  # how many events have a sequence number

    # --- numbering and references ---------------------------------------------------------------------

    def seq(self) -> int:
        """The next event's sequence number."""
        self.numbered += 1
        return self.numbered - 1

    def ref(self, index: int) -> ItemRef:
        return {"item_id": self.output[index]["id"], "output_index": index}

    def part_ref(self, index: int) -> PartRef:
        return {"item_id": self.output[index]["id"], "output_index": index, "content_index": 0}

    # --- items ----------------------------------------------------------------------------------------

    def wire(self, item: OutputItem) -> OutputItem:
        """A frozen copy of an item for an event (the item itself keeps changing)."""
        return copy.deepcopy(
            wire_item(item, self.include_outputs, self.include_sources, self.include_results)
        )

    def add(self, item: OutputItem) -> tuple[int, OutputItemAdded]:
        """Append `item` to the output: its index and its `output_item.added`."""
        self.output.append(item)
        index = len(self.output) - 1
        return index, ev.output_item_added(self.seq(), index, self.wire(item))

    def item_done(self, index: int) -> OutputItemDone:
        return ev.output_item_done(self.seq(), index, self.wire(self.output[index]))

    def message(self, index: int) -> MessageItem:
        item = self.output[index]
        assert item["type"] == "message"
        return item

    def reasoning(self, index: int) -> ReasoningItem:
        item = self.output[index]
        assert item["type"] == "reasoning"
        return item

    def web_search_call(self, index: int) -> WebSearchCallItem:
        item = self.output[index]
        assert item["type"] == "web_search_call"
        return item

    def file_search_call(self, index: int) -> FileSearchCallItem:
        item = self.output[index]
        assert item["type"] == "file_search_call"
        return item

    def function_call(self, index: int) -> FunctionCallItem:
        item = self.output[index]
        assert item["type"] == "function_call"
        return item

    def custom_call(self, index: int) -> CustomToolCallItem:
        item = self.output[index]
        assert item["type"] == "custom_tool_call"
        return item

    def code_call(self, index: int) -> CodeInterpreterCallItem:
        item = self.output[index]
        assert item["type"] == "code_interpreter_call"
        return item

    def mcp_call(self, index: int) -> McpCallItem:
        item = self.output[index]
        assert item["type"] == "mcp_call"
        return item

    # --- the response -----------------------------------------------------------------------------------

    def snapshot(
        self,
        *,
        include_outputs: bool | None = None,
        include_sources: bool | None = None,
        include_results: bool | None = None,
    ) -> ResponseObject:
        """The response object as it stands now (`include_*`: what goes out, the request's when None)."""
        show = self.include_outputs if include_outputs is None else include_outputs
        sources = self.include_sources if include_sources is None else include_sources
        results = self.include_results if include_results is None else include_results
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "completed_at": self.completed_at,
            "error": self.error,
            "incomplete_details": {"reason": self.incomplete_reason} if self.incomplete_reason else None,
            "output": copy.deepcopy(wire_items(self.output, show, sources, results)),
            "usage": usage_dict(self.usage) if self.status in TERMINAL else None,
            **self.base,
        }

    def lifecycle(self, type_: LifecycleType) -> ResponseLifecycle:
        """A `response.*` lifecycle event carrying the response as it stands."""
        return ev.lifecycle(type_, self.seq(), self.snapshot())

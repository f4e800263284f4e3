"""The event builder's core: one response's state, event numbering, item bookkeeping and its snapshot."""

from __future__ import annotations

import base64
import copy
import time

from vllm_responses.builder.citations import WrittenFile
from vllm_responses.engine.types import Usage
from vllm_responses.protocol.events import (
    Event,
    ItemRef,
    LifecycleType,
    OutputItemAdded,
    OutputItemDone,
    PartRef,
    ResponseLifecycle,
)
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    CodeInterpreterCallItem,
    CustomToolCallItem,
    FunctionCallItem,
    ItemStatus,
    MessageItem,
    OutputItem,
    ReasoningItem,
    ResponseEcho,
    ResponseError,
    ResponseObject,
    ResponseUsage,
    wire_item,
    wire_items,
)
from vllm_responses.protocol.status import TERMINAL, ResponseStatus

__all__ = ["REASONING_SEAL", "BuilderCore", "seal_reasoning", "usage_dict"]


def usage_dict(u: Usage) -> ResponseUsage:
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


REASONING_SEAL = "vr1:"


def seal_reasoning(text: str) -> str:
    """The `encrypted_content` of a reasoning item: not secret (the text is in the item already), only
    opaque to clients. Resent as input it is accepted; earlier reasoning is not rendered into prompts."""
    return REASONING_SEAL + base64.urlsafe_b64encode(text.encode()).decode()


class BuilderCore:
    """The state of one response and the plumbing every event of it goes through (see `stream.py`).

    Parameters
    ----------
    base: the response fields echoed from the request (model, tools, tool_choice, instructions, ...).
    include_outputs: whether code-interpreter `outputs` go out on the wire.
    include_reasoning: whether finished reasoning items carry `encrypted_content` (include
        "reasoning.encrypted_content"): an opaque copy of the reasoning a stateless client sends back.
    """

    def __init__(
        self,
        base: ResponseEcho,
        *,
        include_outputs: bool,
        include_reasoning: bool = False,
        response_id: str | None = None,
    ) -> None:
        self.id = response_id or new_id("resp")
        self.created_at = int(time.time())
        self.base = base
        self.include_outputs = include_outputs
        self.include_reasoning = include_reasoning
        self.status = ResponseStatus.IN_PROGRESS
        self.output: list[OutputItem] = []
        self.usage = Usage()
        self.error: ResponseError | None = None
        self.incomplete_reason: str | None = None
        self.completed_at: int | None = None
        self._seq = 0
        self._message: int | None = None  # output_index of the open message, if any
        self._reasoning: int | None = None  # output_index of the open reasoning item, if any
        # output_index of the items with no status still open (custom tool calls, MCP listings and approvals)
        self._custom_open: set[int] = set()
        # Files the response's code wrote (cited in messages, see citations.py) and the ids cited so far.
        self.files: list[WrittenFile] = []
        self._cited: set[str] = set()

    # --- plumbing -------------------------------------------------------------------------------------

    def _next(self) -> int:
        """The next event's sequence number."""
        self._seq += 1
        return self._seq - 1

    def _ref(self, index: int) -> ItemRef:
        return {"item_id": self.output[index]["id"], "output_index": index}

    def _part(self, index: int) -> PartRef:
        return {"item_id": self.output[index]["id"], "output_index": index, "content_index": 0}

    def _wire(self, item: OutputItem) -> OutputItem:
        """A frozen copy of an item for an event (the item itself keeps changing)."""
        return copy.deepcopy(wire_item(item, self.include_outputs))

    def _add_item(self, item: OutputItem) -> tuple[int, OutputItemAdded]:
        self.output.append(item)
        index = len(self.output) - 1
        event: OutputItemAdded = {
            "type": "response.output_item.added",
            "sequence_number": self._next(),
            "output_index": index,
            "item": self._wire(item),
        }
        return index, event

    def _item_done(self, index: int) -> OutputItemDone:
        return {
            "type": "response.output_item.done",
            "sequence_number": self._next(),
            "output_index": index,
            "item": self._wire(self.output[index]),
        }

    def _message_item(self, index: int) -> MessageItem:
        item = self.output[index]
        assert item["type"] == "message"
        return item

    def _reasoning_item(self, index: int) -> ReasoningItem:
        item = self.output[index]
        assert item["type"] == "reasoning"
        return item

    def _function_item(self, index: int) -> FunctionCallItem:
        item = self.output[index]
        assert item["type"] == "function_call"
        return item

    def _custom_item(self, index: int) -> CustomToolCallItem:
        item = self.output[index]
        assert item["type"] == "custom_tool_call"
        return item

    def code_item(self, index: int) -> CodeInterpreterCallItem:
        item = self.output[index]
        assert item["type"] == "code_interpreter_call"
        return item

    def snapshot(self, *, include_outputs: bool | None = None) -> ResponseObject:
        """The response object as it stands now."""
        show = self.include_outputs if include_outputs is None else include_outputs
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "completed_at": self.completed_at,
            "error": self.error,
            "incomplete_details": {"reason": self.incomplete_reason} if self.incomplete_reason else None,
            "output": copy.deepcopy(wire_items(self.output, show)),
            "usage": usage_dict(self.usage) if self.status in TERMINAL else None,
            **self.base,
        }

    def _lifecycle(self, type_: LifecycleType) -> ResponseLifecycle:
        return {"type": type_, "sequence_number": self._next(), "response": self.snapshot()}

    def close_open(self, status: ItemStatus = "completed", *, final: bool = False) -> list[Event]:
        """Finish an open message or reasoning item (`ResponseBuilder` knows how)."""
        raise NotImplementedError

"""The response event builder: pure, synchronous, and the only place that numbers events and output items.

`ResponseBuilder` holds one response's state (its output items, usage, status). Each method takes one
step of the response's life (text arrived, a code call started, ...) and returns the Responses API stream
events for it (typed in `protocol/events.py`), already carrying their final `sequence_number`,
`output_index`, `item_id` and `content_index`. `snapshot()` gives the response object those events
describe, so the streamed and the stored/non-streamed forms cannot drift apart. Items always keep their
full code-interpreter `outputs` internally; `protocol.items.wire_item` blanks them on the way out.
The builder knows nothing of HTTP: why a response failed is its caller's business (`errors.py`).
"""

from __future__ import annotations

import base64
import copy
import secrets
import time

from vllm_responses.chat import Usage
from vllm_responses.citations import WrittenFile, file_citations
from vllm_responses.protocol.events import (
    AnnotationAdded,
    CodeCallCompleted,
    CodeCallInProgress,
    CodeCallInterpreting,
    CodeDelta,
    CodeDone,
    ContentPartAdded,
    ContentPartDone,
    Event,
    FunctionArgumentsDelta,
    FunctionArgumentsDone,
    LifecycleType,
    OutputItemAdded,
    OutputItemDone,
    ReasoningTextDelta,
    ReasoningTextDone,
    ResponseLifecycle,
    TextDelta,
    TextDone,
)
from vllm_responses.protocol.items import (
    CodeInterpreterCallItem,
    CodeOutput,
    FunctionCallItem,
    ItemStatus,
    MessageItem,
    OutputItem,
    OutputText,
    ReasoningItem,
    ResponseEcho,
    ResponseError,
    ResponseObject,
    ResponseStatus,
    ResponseUsage,
    wire_item,
    wire_items,
)

__all__ = ["REASONING_SEAL", "ResponseBuilder", "new_id", "seal_reasoning", "usage_dict"]

def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


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


class ResponseBuilder:
    """Builds the events and the snapshot of one response.

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
        self.status: ResponseStatus = "in_progress"
        self.output: list[OutputItem] = []
        self.usage = Usage()
        self.error: ResponseError | None = None
        self.incomplete_reason: str | None = None
        self.completed_at: int | None = None
        self._seq = 0
        self._message: int | None = None  # output_index of the open message, if any
        self._reasoning: int | None = None  # output_index of the open reasoning item, if any
        # Files the response's code wrote (cited in messages, see citations.py) and the ids cited so far.
        self.files: list[WrittenFile] = []
        self._cited: set[str] = set()

    # --- plumbing -------------------------------------------------------------------------------------

    def _next(self) -> int:
        """The next event's sequence number."""
        self._seq += 1
        return self._seq - 1

    def _wire(self, item: OutputItem) -> OutputItem:
        """A frozen copy of an item for an event (the item itself keeps changing)."""
        return copy.deepcopy(wire_item(item, self.include_outputs))

    def _add_item(self, item: OutputItem) -> tuple[int, OutputItemAdded]:
        self.output.append(item)
        index = len(self.output) - 1
        return index, OutputItemAdded(
            type="response.output_item.added", sequence_number=self._next(), output_index=index, item=self._wire(item)
        )

    def _item_done(self, index: int) -> OutputItemDone:
        return OutputItemDone(
            type="response.output_item.done",
            sequence_number=self._next(),
            output_index=index,
            item=self._wire(self.output[index]),
        )

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

    def code_item(self, index: int) -> CodeInterpreterCallItem:
        item = self.output[index]
        assert item["type"] == "code_interpreter_call"
        return item

    def snapshot(self, *, include_outputs: bool | None = None) -> ResponseObject:
        """The response object as it stands now."""
        show = self.include_outputs if include_outputs is None else include_outputs
        terminal = self.status in ("completed", "incomplete", "failed", "cancelled")
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "completed_at": self.completed_at,
            "error": self.error,
            "incomplete_details": {"reason": self.incomplete_reason} if self.incomplete_reason else None,
            "output": copy.deepcopy(wire_items(self.output, show)),
            "usage": usage_dict(self.usage) if terminal else None,
            **self.base,
        }

    def _lifecycle(self, type_: LifecycleType) -> ResponseLifecycle:
        return ResponseLifecycle(type=type_, sequence_number=self._next(), response=self.snapshot())

    # --- lifecycle ------------------------------------------------------------------------------------

    def created(self) -> list[Event]:
        return [self._lifecycle("response.created"), self._lifecycle("response.in_progress")]

    def close_open(self, status: ItemStatus = "completed", *, final: bool = False) -> list[Event]:
        """Finish an open message or reasoning item (before a tool call, or at the end). `final`: nothing
        follows, so a message closed now cites the written files no message mentioned."""
        events: list[Event] = []
        if self._reasoning is not None:
            events += self._close_reasoning(status)
        if self._message is not None:
            events += self._close_message(status, final=final)
        return events

    def note_files(self, files: list[WrittenFile]) -> None:
        """Files code wrote during this response (a file written again replaces its earlier entry)."""
        ids = {f.file_id for f in files}
        self.files = [f for f in self.files if f.file_id not in ids] + files

    def completed(self, usage: Usage) -> list[Event]:
        return self._finish("completed", "response.completed", usage)

    def incomplete(self, reason: str, usage: Usage) -> list[Event]:
        events = self.close_open("incomplete", final=True)
        self.incomplete_reason = reason
        return events + self._finish("incomplete", "response.incomplete", usage)

    def failed(self, message: str, usage: Usage, code: str = "server_error") -> list[Event]:
        events = self.close_open("incomplete")
        for index, item in enumerate(self.output):
            if item["type"] == "code_interpreter_call" and item["status"] in ("in_progress", "interpreting"):
                item["status"] = "failed"
                events.append(self._item_done(index))
            elif item["type"] != "code_interpreter_call" and item["status"] == "in_progress":
                item["status"] = "incomplete"
                events.append(self._item_done(index))
        self.error = {"code": code, "message": message}
        return events + self._finish("failed", "response.failed", usage)

    def cancelled(self, usage: Usage) -> None:
        """Mark the response cancelled (no event: the stream that would carry it is gone)."""
        self.usage = usage
        self.status = "cancelled"
        self.completed_at = int(time.time())

    def _finish(self, status: ResponseStatus, type_: LifecycleType, usage: Usage) -> list[Event]:
        events = self.close_open(final=True)
        self.usage = usage
        self.status = status
        self.completed_at = int(time.time())
        return [*events, self._lifecycle(type_)]

    # --- message text ---------------------------------------------------------------------------------

    def text_delta(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._reasoning is not None:
            events += self._close_reasoning("completed")
        if self._message is None:
            part: OutputText = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            new: MessageItem = {
                "id": new_id("msg"), "type": "message", "role": "assistant", "status": "in_progress", "content": [],
            }
            index, added = self._add_item(new)
            new["content"].append(part)
            self._message = index
            events += [
                added,
                ContentPartAdded(
                    type="response.content_part.added", sequence_number=self._next(), item_id=new["id"],
                    output_index=index, content_index=0, part=part.copy(),
                ),
            ]
        index = self._message
        item = self._message_item(index)
        item["content"][0]["text"] += text
        events.append(
            TextDelta(
                type="response.output_text.delta", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, delta=text, logprobs=[],
            )
        )
        return events

    def _close_message(self, status: ItemStatus, *, final: bool = False) -> list[Event]:
        assert self._message is not None
        index, self._message = self._message, None
        item = self._message_item(index)
        part = item["content"][0]
        item["status"] = status
        part["annotations"] = file_citations(part["text"], self.files, cite_rest=final, already_cited=self._cited)
        self._cited |= {a["file_id"] for a in part["annotations"]}
        events: list[Event] = [
            AnnotationAdded(
                type="response.output_text.annotation.added", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, annotation_index=i, annotation=a.copy(),
            )
            for i, a in enumerate(part["annotations"])
        ]
        return [
            *events,
            TextDone(
                type="response.output_text.done", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, text=part["text"], logprobs=[],
            ),
            ContentPartDone(
                type="response.content_part.done", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, part=copy.deepcopy(part),
            ),
            self._item_done(index),
        ]

    # --- reasoning ------------------------------------------------------------------------------------

    def reasoning_delta(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._message is not None:
            events += self._close_message("completed")
        if self._reasoning is None:
            new: ReasoningItem = {
                "id": new_id("rs"), "type": "reasoning", "summary": [], "status": "in_progress",
                "content": [{"type": "reasoning_text", "text": ""}],
            }
            index, added = self._add_item(new)
            self._reasoning = index
            events += [
                added,
                ContentPartAdded(
                    type="response.content_part.added", sequence_number=self._next(), item_id=new["id"],
                    output_index=index, content_index=0, part={"type": "reasoning_text", "text": ""},
                ),
            ]
        index = self._reasoning
        item = self._reasoning_item(index)
        item["content"][0]["text"] += text
        events.append(
            ReasoningTextDelta(
                type="response.reasoning_text.delta", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, delta=text,
            )
        )
        return events

    def _close_reasoning(self, status: ItemStatus) -> list[Event]:
        assert self._reasoning is not None
        index, self._reasoning = self._reasoning, None
        item = self._reasoning_item(index)
        item["status"] = status
        text = item["content"][0]["text"]
        if self.include_reasoning:
            item["encrypted_content"] = seal_reasoning(text)
        return [
            ReasoningTextDone(
                type="response.reasoning_text.done", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, text=text,
            ),
            ContentPartDone(
                type="response.content_part.done", sequence_number=self._next(), item_id=item["id"],
                output_index=index, content_index=0, part={"type": "reasoning_text", "text": text},
            ),
            self._item_done(index),
        ]

    # --- function calls -------------------------------------------------------------------------------

    def function_call_start(self, name: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: FunctionCallItem = {
            "id": new_id("fc"), "type": "function_call", "call_id": new_id("call"), "name": name,
            "arguments": "", "status": "in_progress",
        }
        index, added = self._add_item(new)
        return index, [*events, added]

    def function_call_delta(self, index: int, delta: str) -> list[Event]:
        item = self._function_item(index)
        item["arguments"] += delta
        return [
            FunctionArgumentsDelta(
                type="response.function_call_arguments.delta", sequence_number=self._next(), item_id=item["id"],
                output_index=index, delta=delta,
            )
        ]

    def function_call_done(self, index: int, arguments: str | None = None) -> list[Event]:
        item = self._function_item(index)
        if arguments is not None:
            item["arguments"] = arguments
        item["status"] = "completed"
        return [
            FunctionArgumentsDone(
                type="response.function_call_arguments.done", sequence_number=self._next(), item_id=item["id"],
                output_index=index, arguments=item["arguments"],
            ),
            self._item_done(index),
        ]

    # --- code interpreter calls -----------------------------------------------------------------------

    def code_start(self, container_id: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: CodeInterpreterCallItem = {
            "id": new_id("ci"), "type": "code_interpreter_call", "code": "", "container_id": container_id,
            "status": "in_progress", "outputs": None,
        }
        index, added = self._add_item(new)
        in_progress = CodeCallInProgress(
            type="response.code_interpreter_call.in_progress", sequence_number=self._next(), item_id=new["id"],
            output_index=index,
        )
        return index, [*events, added, in_progress]

    def code_delta(self, index: int, delta: str) -> list[Event]:
        item = self.code_item(index)
        item["code"] += delta
        return [
            CodeDelta(
                type="response.code_interpreter_call_code.delta", sequence_number=self._next(), item_id=item["id"],
                output_index=index, delta=delta,
            )
        ]

    def code_done(self, index: int) -> list[Event]:
        item = self.code_item(index)
        item["status"] = "interpreting"
        return [
            CodeDone(
                type="response.code_interpreter_call_code.done", sequence_number=self._next(), item_id=item["id"],
                output_index=index, code=item["code"],
            ),
            CodeCallInterpreting(
                type="response.code_interpreter_call.interpreting", sequence_number=self._next(),
                item_id=item["id"], output_index=index,
            ),
        ]

    def code_finished(self, index: int, outputs: list[CodeOutput], *, failed: bool = False) -> list[Event]:
        item = self.code_item(index)
        item["outputs"] = outputs
        item["status"] = "failed" if failed else "completed"
        events: list[Event] = []
        if not failed:
            events.append(
                CodeCallCompleted(
                    type="response.code_interpreter_call.completed", sequence_number=self._next(),
                    item_id=item["id"], output_index=index,
                )
            )
        return [*events, self._item_done(index)]

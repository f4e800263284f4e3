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

import copy
import time

from vllm_responses.builder.citations import WrittenFile, file_citations
from vllm_responses.builder.core import seal_reasoning
from vllm_responses.builder.mcp import McpSteps
from vllm_responses.engine.types import Usage
from vllm_responses.protocol.events import (
    AnnotationAdded,
    CodeCallCompleted,
    CodeCallInProgress,
    CodeCallInterpreting,
    CodeDelta,
    CodeDone,
    ContentPartAdded,
    ContentPartDone,
    CustomInputDelta,
    CustomInputDone,
    Event,
    FunctionArgumentsDelta,
    FunctionArgumentsDone,
    ReasoningTextDelta,
    ReasoningTextDone,
    TextDelta,
    TextDone,
)
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    CodeInterpreterCallItem,
    CodeOutput,
    CompactionItem,
    CustomToolCallItem,
    FunctionCallItem,
    ItemStatus,
    MessageItem,
    OutputText,
    ReasoningItem,
)
from vllm_responses.protocol.status import END_EVENTS, ResponseStatus

__all__ = ["ResponseBuilder"]


class ResponseBuilder(McpSteps):
    """Builds the events and the snapshot of one response: one method per step of its life (parameters:
    `BuilderCore`'s)."""

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
        return self._finish(ResponseStatus.COMPLETED, usage)

    def incomplete(self, reason: str, usage: Usage) -> list[Event]:
        events = self.close_open("incomplete", final=True)
        self.incomplete_reason = reason
        return events + self._finish(ResponseStatus.INCOMPLETE, usage)

    def failed(self, message: str, usage: Usage, code: str = "server_error") -> list[Event]:
        events = self.close_open("incomplete")
        for index, item in enumerate(self.output):
            if item["type"] == "compaction":
                continue  # finished when added
            if (
                item["type"] == "custom_tool_call"
                or item["type"] == "mcp_list_tools"
                or item["type"] == "mcp_approval_request"
            ):  # no status: one still streaming is ended as it stands
                if index in self._custom_open:
                    self._custom_open.discard(index)
                    events.append(self._item_done(index))
                continue
            if item["type"] == "code_interpreter_call":
                if item["status"] in ("in_progress", "interpreting"):
                    item["status"] = "failed"
                    events.append(self._item_done(index))
            elif item["status"] == "in_progress":
                item["status"] = "incomplete"
                events.append(self._item_done(index))
        self.error = {"code": code, "message": message}
        return events + self._finish(ResponseStatus.FAILED, usage)

    def cancelled(self, usage: Usage) -> None:
        """Mark the response cancelled (no event: the stream that would carry it is gone)."""
        self.usage = usage
        self.status = ResponseStatus.CANCELLED
        self.completed_at = int(time.time())

    def _finish(self, status: ResponseStatus, usage: Usage) -> list[Event]:
        events = self.close_open(final=True)
        self.usage = usage
        self.status = status
        self.completed_at = int(time.time())
        return [*events, self._lifecycle(END_EVENTS[status])]

    # --- compaction -----------------------------------------------------------------------------------

    def compaction(self, item: CompactionItem) -> list[Event]:
        """The compaction item of a context compacted before the first model call (`context_management`):
        added and done at once, ahead of the rest of the output, so a stateless client can send it back."""
        index, added = self._add_item(item)
        return [added, self._item_done(index)]

    # --- message text ---------------------------------------------------------------------------------

    def text_delta(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._reasoning is not None:
            events += self._close_reasoning("completed")
        if self._message is None:
            part: OutputText = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            new: MessageItem = {
                "id": new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            index, added = self._add_item(new)
            new["content"].append(part)
            self._message = index
            part_added: ContentPartAdded = {
                "type": "response.content_part.added",
                "sequence_number": self._next(),
                "part": part.copy(),
                **self._part(index),
            }
            events += [added, part_added]
        index = self._message
        self._message_item(index)["content"][0]["text"] += text
        delta: TextDelta = {
            "type": "response.output_text.delta",
            "sequence_number": self._next(),
            "delta": text,
            "logprobs": [],
            **self._part(index),
        }
        return [*events, delta]

    def _close_message(self, status: ItemStatus, *, final: bool = False) -> list[Event]:
        assert self._message is not None
        index, self._message = self._message, None
        item = self._message_item(index)
        part = item["content"][0]
        item["status"] = status
        part["annotations"] = file_citations(
            part["text"], self.files, cite_rest=final, already_cited=self._cited
        )
        self._cited |= {a["file_id"] for a in part["annotations"]}
        annotations: list[AnnotationAdded] = [
            {
                "type": "response.output_text.annotation.added",
                "sequence_number": self._next(),
                "annotation_index": i,
                "annotation": a.copy(),
                **self._part(index),
            }
            for i, a in enumerate(part["annotations"])
        ]
        text_done: TextDone = {
            "type": "response.output_text.done",
            "sequence_number": self._next(),
            "text": part["text"],
            "logprobs": [],
            **self._part(index),
        }
        part_done: ContentPartDone = {
            "type": "response.content_part.done",
            "sequence_number": self._next(),
            "part": copy.deepcopy(part),
            **self._part(index),
        }
        return [*annotations, text_done, part_done, self._item_done(index)]

    # --- reasoning ------------------------------------------------------------------------------------

    def reasoning_delta(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._message is not None:
            events += self._close_message("completed")
        if self._reasoning is None:
            new: ReasoningItem = {
                "id": new_id("rs"),
                "type": "reasoning",
                "summary": [],
                "status": "in_progress",
                "content": [{"type": "reasoning_text", "text": ""}],
            }
            index, added = self._add_item(new)
            self._reasoning = index
            part_added: ContentPartAdded = {
                "type": "response.content_part.added",
                "sequence_number": self._next(),
                "part": {"type": "reasoning_text", "text": ""},
                **self._part(index),
            }
            events += [added, part_added]
        index = self._reasoning
        self._reasoning_item(index)["content"][0]["text"] += text
        delta: ReasoningTextDelta = {
            "type": "response.reasoning_text.delta",
            "sequence_number": self._next(),
            "delta": text,
            **self._part(index),
        }
        return [*events, delta]

    def _close_reasoning(self, status: ItemStatus) -> list[Event]:
        assert self._reasoning is not None
        index, self._reasoning = self._reasoning, None
        item = self._reasoning_item(index)
        item["status"] = status
        text = item["content"][0]["text"]
        if self.include_reasoning:
            item["encrypted_content"] = seal_reasoning(text)
        text_done: ReasoningTextDone = {
            "type": "response.reasoning_text.done",
            "sequence_number": self._next(),
            "text": text,
            **self._part(index),
        }
        part_done: ContentPartDone = {
            "type": "response.content_part.done",
            "sequence_number": self._next(),
            "part": {"type": "reasoning_text", "text": text},
            **self._part(index),
        }
        return [text_done, part_done, self._item_done(index)]

    # --- function calls -------------------------------------------------------------------------------

    def function_call_start(self, name: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: FunctionCallItem = {
            "id": new_id("fc"),
            "type": "function_call",
            "call_id": new_id("call"),
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        index, added = self._add_item(new)
        return index, [*events, added]

    def function_call_delta(self, index: int, delta: str) -> list[Event]:
        self._function_item(index)["arguments"] += delta
        event: FunctionArgumentsDelta = {
            "type": "response.function_call_arguments.delta",
            "sequence_number": self._next(),
            "delta": delta,
            **self._ref(index),
        }
        return [event]

    def function_call_done(self, index: int, arguments: str | None = None) -> list[Event]:
        item = self._function_item(index)
        if arguments is not None:
            item["arguments"] = arguments
        item["status"] = "completed"
        done: FunctionArgumentsDone = {
            "type": "response.function_call_arguments.done",
            "sequence_number": self._next(),
            "arguments": item["arguments"],
            **self._ref(index),
        }
        return [done, self._item_done(index)]

    # --- custom tool calls -----------------------------------------------------------------------------

    def custom_call_start(self, name: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: CustomToolCallItem = {
            "id": new_id("ctc"),
            "type": "custom_tool_call",
            "call_id": new_id("call"),
            "name": name,
            "input": "",
        }
        index, added = self._add_item(new)
        self._custom_open.add(index)
        return index, [*events, added]

    def custom_call_delta(self, index: int, delta: str) -> list[Event]:
        self._custom_item(index)["input"] += delta
        event: CustomInputDelta = {
            "type": "response.custom_tool_call_input.delta",
            "sequence_number": self._next(),
            "delta": delta,
            **self._ref(index),
        }
        return [event]

    def custom_call_done(self, index: int) -> list[Event]:
        self._custom_open.discard(index)
        done: CustomInputDone = {
            "type": "response.custom_tool_call_input.done",
            "sequence_number": self._next(),
            "input": self._custom_item(index)["input"],
            **self._ref(index),
        }
        return [done, self._item_done(index)]

    # --- code interpreter calls -----------------------------------------------------------------------

    def code_start(self, container_id: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: CodeInterpreterCallItem = {
            "id": new_id("ci"),
            "type": "code_interpreter_call",
            "code": "",
            "container_id": container_id,
            "status": "in_progress",
            "outputs": None,
        }
        index, added = self._add_item(new)
        in_progress: CodeCallInProgress = {
            "type": "response.code_interpreter_call.in_progress",
            "sequence_number": self._next(),
            **self._ref(index),
        }
        return index, [*events, added, in_progress]

    def code_delta(self, index: int, delta: str) -> list[Event]:
        self.code_item(index)["code"] += delta
        event: CodeDelta = {
            "type": "response.code_interpreter_call_code.delta",
            "sequence_number": self._next(),
            "delta": delta,
            **self._ref(index),
        }
        return [event]

    def code_done(self, index: int) -> list[Event]:
        item = self.code_item(index)
        item["status"] = "interpreting"
        done: CodeDone = {
            "type": "response.code_interpreter_call_code.done",
            "sequence_number": self._next(),
            "code": item["code"],
            **self._ref(index),
        }
        interpreting: CodeCallInterpreting = {
            "type": "response.code_interpreter_call.interpreting",
            "sequence_number": self._next(),
            **self._ref(index),
        }
        return [done, interpreting]

    def code_finished(self, index: int, outputs: list[CodeOutput], *, failed: bool = False) -> list[Event]:
        item = self.code_item(index)
        item["outputs"] = outputs
        item["status"] = "failed" if failed else "completed"
        if failed:
            return [self._item_done(index)]
        completed: CodeCallCompleted = {
            "type": "response.code_interpreter_call.completed",
            "sequence_number": self._next(),
            **self._ref(index),
        }
        return [completed, self._item_done(index)]

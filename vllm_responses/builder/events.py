"""One constructor per stream event type, each returning its `protocol/events.py` TypedDict.

The dict's keys start with `type` and `sequence_number`. Each constructor takes the event's `sequence_number`
(after its type, where one constructor serves several types), then the item (`ItemRef`, or its
`output_index`) or content part (`PartRef`) it is about, then its payload. They only shape: numbering and
item state are the builder's (`core.py`).
"""

from __future__ import annotations

from vllm_responses.protocol.events import (
    AnnotationAdded,
    CodeCallCompleted,
    CodeCallInProgress,
    CodeCallInterpreting,
    CodeDelta,
    CodeDone,
    CompactionCompacting,
    ContentPartAdded,
    ContentPartDone,
    CustomInputDelta,
    CustomInputDone,
    FileSearchEvent,
    FileSearchEventType,
    FunctionArgumentsDelta,
    FunctionArgumentsDone,
    ItemRef,
    LifecycleType,
    Logprob,
    McpArgumentsDelta,
    McpArgumentsDone,
    McpItemEvent,
    McpItemEventType,
    OutputItemAdded,
    OutputItemDone,
    Part,
    PartRef,
    ReasoningTextDelta,
    ReasoningTextDone,
    ResponseLifecycle,
    ShellCommandAdded,
    ShellCommandDelta,
    ShellCommandDone,
    SummaryPartAdded,
    SummaryPartDone,
    SummaryRef,
    SummaryTextDelta,
    SummaryTextDone,
    TextDelta,
    TextDone,
    WebSearchEvent,
    WebSearchEventType,
)
from vllm_responses.protocol.items import Annotation, OutputItem, ResponseObject, SummaryText

__all__ = [
    "annotation_added",
    "code_call_completed",
    "code_call_in_progress",
    "code_call_interpreting",
    "code_delta",
    "code_done",
    "compaction_compacting",
    "content_part_added",
    "content_part_done",
    "custom_input_delta",
    "custom_input_done",
    "file_search_event",
    "function_arguments_delta",
    "function_arguments_done",
    "lifecycle",
    "mcp_arguments_delta",
    "mcp_arguments_done",
    "mcp_item_event",
    "output_item_added",
    "output_item_done",
    "reasoning_text_delta",
    "reasoning_text_done",
    "shell_command_added",
    "shell_command_delta",
    "shell_command_done",
    "summary_part_added",
    "summary_part_done",
    "summary_text_delta",
    "summary_text_done",
    "text_delta",
    "text_done",
]

# --- the response and its items ---------------------------------------------------------------------


def lifecycle(type_: LifecycleType, seq: int, response: ResponseObject) -> ResponseLifecycle:
    return {"type": type_, "sequence_number": seq, "response": response}


def output_item_added(seq: int, index: int, item: OutputItem) -> OutputItemAdded:
    return {"type": "response.output_item.added", "sequence_number": seq, "output_index": index, "item": item}


def output_item_done(seq: int, index: int, item: OutputItem) -> OutputItemDone:
    return {"type": "response.output_item.done", "sequence_number": seq, "output_index": index, "item": item}


# --- content parts: message text and reasoning text --------------------------------------------------


def content_part_added(seq: int, ref: PartRef, part: Part) -> ContentPartAdded:
    return {"type": "response.content_part.added", "sequence_number": seq, "part": part, **ref}


def content_part_done(seq: int, ref: PartRef, part: Part) -> ContentPartDone:
    return {"type": "response.content_part.done", "sequence_number": seq, "part": part, **ref}


def text_delta(seq: int, ref: PartRef, delta: str, logprobs: list[Logprob] | None = None) -> TextDelta:
    return {
        "type": "response.output_text.delta",
        "sequence_number": seq,
        "delta": delta,
        "logprobs": logprobs or [],
        **ref,
    }


def text_done(seq: int, ref: PartRef, text: str, logprobs: list[Logprob] | None = None) -> TextDone:
    return {
        "type": "response.output_text.done",
        "sequence_number": seq,
        "text": text,
        "logprobs": logprobs or [],
        **ref,
    }


def annotation_added(seq: int, ref: PartRef, index: int, annotation: Annotation) -> AnnotationAdded:
    return {
        "type": "response.output_text.annotation.added",
        "sequence_number": seq,
        "annotation_index": index,
        "annotation": annotation,
        **ref,
    }


def reasoning_text_delta(seq: int, ref: PartRef, delta: str) -> ReasoningTextDelta:
    return {"type": "response.reasoning_text.delta", "sequence_number": seq, "delta": delta, **ref}


def reasoning_text_done(seq: int, ref: PartRef, text: str) -> ReasoningTextDone:
    return {"type": "response.reasoning_text.done", "sequence_number": seq, "text": text, **ref}


# --- a reasoning item's summary parts ----------------------------------------------------------------


def summary_part_added(seq: int, ref: SummaryRef, part: SummaryText) -> SummaryPartAdded:
    return {"type": "response.reasoning_summary_part.added", "sequence_number": seq, "part": part, **ref}


def summary_text_delta(seq: int, ref: SummaryRef, delta: str) -> SummaryTextDelta:
    return {"type": "response.reasoning_summary_text.delta", "sequence_number": seq, "delta": delta, **ref}


def summary_text_done(seq: int, ref: SummaryRef, text: str) -> SummaryTextDone:
    return {"type": "response.reasoning_summary_text.done", "sequence_number": seq, "text": text, **ref}


def summary_part_done(seq: int, ref: SummaryRef, part: SummaryText) -> SummaryPartDone:
    return {"type": "response.reasoning_summary_part.done", "sequence_number": seq, "part": part, **ref}


# --- function and custom tool calls ------------------------------------------------------------------


def function_arguments_delta(seq: int, ref: ItemRef, delta: str) -> FunctionArgumentsDelta:
    return {"type": "response.function_call_arguments.delta", "sequence_number": seq, "delta": delta, **ref}


def function_arguments_done(seq: int, ref: ItemRef, arguments: str) -> FunctionArgumentsDone:
    return {
        "type": "response.function_call_arguments.done",
        "sequence_number": seq,
        "arguments": arguments,
        **ref,
    }


def custom_input_delta(seq: int, ref: ItemRef, delta: str) -> CustomInputDelta:
    return {"type": "response.custom_tool_call_input.delta", "sequence_number": seq, "delta": delta, **ref}


def custom_input_done(seq: int, ref: ItemRef, input_: str) -> CustomInputDone:
    return {"type": "response.custom_tool_call_input.done", "sequence_number": seq, "input": input_, **ref}


# --- code interpreter calls ---------------------------------------------------------------------------


def code_call_in_progress(seq: int, ref: ItemRef) -> CodeCallInProgress:
    return {"type": "response.code_interpreter_call.in_progress", "sequence_number": seq, **ref}


def code_delta(seq: int, ref: ItemRef, delta: str) -> CodeDelta:
    return {
        "type": "response.code_interpreter_call_code.delta",
        "sequence_number": seq,
        "delta": delta,
        **ref,
    }


def code_done(seq: int, ref: ItemRef, code: str) -> CodeDone:
    return {"type": "response.code_interpreter_call_code.done", "sequence_number": seq, "code": code, **ref}


def code_call_interpreting(seq: int, ref: ItemRef) -> CodeCallInterpreting:
    return {"type": "response.code_interpreter_call.interpreting", "sequence_number": seq, **ref}


def code_call_completed(seq: int, ref: ItemRef) -> CodeCallCompleted:
    return {"type": "response.code_interpreter_call.completed", "sequence_number": seq, **ref}


# --- compaction ------------------------------------------------------------------------------------------


def compaction_compacting(seq: int, ref: ItemRef) -> CompactionCompacting:
    return {"type": "response.compaction.compacting", "sequence_number": seq, **ref}


# --- shell calls' commands ---------------------------------------------------------------------------


def shell_command_added(seq: int, index: int, command_index: int) -> ShellCommandAdded:
    return {
        "type": "response.shell_call_command.added",
        "sequence_number": seq,
        "output_index": index,
        "command_index": command_index,
        "command": "",
    }


def shell_command_delta(seq: int, index: int, command_index: int, delta: str) -> ShellCommandDelta:
    return {
        "type": "response.shell_call_command.delta",
        "sequence_number": seq,
        "output_index": index,
        "command_index": command_index,
        "delta": delta,
    }


def shell_command_done(seq: int, index: int, command_index: int, command: str) -> ShellCommandDone:
    return {
        "type": "response.shell_call_command.done",
        "sequence_number": seq,
        "output_index": index,
        "command_index": command_index,
        "command": command,
    }


# --- remote MCP -----------------------------------------------------------------------------------------


def mcp_item_event(type_: McpItemEventType, seq: int, ref: ItemRef) -> McpItemEvent:
    return {"type": type_, "sequence_number": seq, **ref}


def web_search_event(type_: WebSearchEventType, seq: int, ref: ItemRef) -> WebSearchEvent:
    return {"type": type_, "sequence_number": seq, **ref}


def file_search_event(type_: FileSearchEventType, seq: int, ref: ItemRef) -> FileSearchEvent:
    return {"type": type_, "sequence_number": seq, **ref}


def mcp_arguments_delta(seq: int, ref: ItemRef, delta: str) -> McpArgumentsDelta:
    return {"type": "response.mcp_call_arguments.delta", "sequence_number": seq, "delta": delta, **ref}


def mcp_arguments_done(seq: int, ref: ItemRef, arguments: str) -> McpArgumentsDone:
    return {"type": "response.mcp_call_arguments.done", "sequence_number": seq, "arguments": arguments, **ref}

"""Typed shapes of the stream events we send, one TypedDict per event type (`ResponseStreamEvent` members).

Every event carries its final `sequence_number`; `builder/events.py` has a constructor for each, and the
builder is the only place that numbers them. `tests/protocol/test_protocol_types.py` checks each against the
`openai` SDK model of the same type.
"""

from __future__ import annotations

from typing import Literal, TypedDict, Union

from vllm_responses.protocol.items import (
    Annotation,
    OutputItem,
    OutputText,
    ReasoningContent,
    ResponseObject,
    SummaryText,
)
from vllm_responses.protocol.status import EndEventType

__all__ = [
    "AnnotationAdded",
    "CodeCallCompleted",
    "CodeCallInProgress",
    "CodeCallInterpreting",
    "CodeDelta",
    "CodeDone",
    "CompactionCompacting",
    "ContentPartAdded",
    "ContentPartDone",
    "CustomInputDelta",
    "CustomInputDone",
    "Event",
    "FunctionArgumentsDelta",
    "FunctionArgumentsDone",
    "ItemRef",
    "LifecycleType",
    "Logprob",
    "McpArgumentsDelta",
    "McpArgumentsDone",
    "McpItemEvent",
    "McpItemEventType",
    "OutputItemAdded",
    "OutputItemDone",
    "Part",
    "PartRef",
    "ReasoningTextDelta",
    "ReasoningTextDone",
    "SummaryPartAdded",
    "SummaryPartDone",
    "SummaryRef",
    "SummaryTextDelta",
    "SummaryTextDone",
    "ResponseLifecycle",
    "ShellCommandAdded",
    "ShellCommandDelta",
    "ShellCommandDone",
    "TextDelta",
    "TextDone",
    "TopLogprob",
    "FileSearchEvent",
    "FileSearchEventType",
    "WebSearchEvent",
    "WebSearchEventType",
]

Part = Union[OutputText, ReasoningContent]


class ItemRef(TypedDict):
    """The item an event is about (spread into the event)."""

    item_id: str
    output_index: int


class PartRef(ItemRef):
    """The content part of an item an event is about."""

    content_index: int


LifecycleType = Literal["response.created", "response.queued", "response.in_progress", EndEventType]


class ResponseLifecycle(TypedDict):
    """response.created / queued / in_progress / completed / incomplete / failed: the response as it stands."""

    type: LifecycleType
    sequence_number: int
    response: ResponseObject


class OutputItemAdded(TypedDict):
    type: Literal["response.output_item.added"]
    sequence_number: int
    output_index: int
    item: OutputItem


class OutputItemDone(TypedDict):
    type: Literal["response.output_item.done"]
    sequence_number: int
    output_index: int
    item: OutputItem


class ContentPartAdded(TypedDict):
    type: Literal["response.content_part.added"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: Part


class ContentPartDone(TypedDict):
    type: Literal["response.content_part.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: Part


class TopLogprob(TypedDict):
    """`ResponseTextDeltaEvent`'s `LogprobTopLogprob` (and the done event's)."""

    token: str
    logprob: float


class Logprob(TypedDict):
    """`ResponseTextDeltaEvent`'s `Logprob` (and the done event's): no `bytes`, unlike the output part's."""

    token: str
    logprob: float
    top_logprobs: list[TopLogprob]


class TextDelta(TypedDict):
    type: Literal["response.output_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Logprob]  # the tokens of this delta


class TextDone(TypedDict):
    type: Literal["response.output_text.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Logprob]  # all the tokens of the text


class AnnotationAdded(TypedDict):
    type: Literal["response.output_text.annotation.added"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: Annotation


class ReasoningTextDelta(TypedDict):
    type: Literal["response.reasoning_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDone(TypedDict):
    type: Literal["response.reasoning_text.done"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str


class SummaryRef(ItemRef):
    """The summary part of a reasoning item an event is about."""

    summary_index: int


class SummaryPartAdded(TypedDict):
    type: Literal["response.reasoning_summary_part.added"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    part: SummaryText


class SummaryTextDelta(TypedDict):
    type: Literal["response.reasoning_summary_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    delta: str


class SummaryTextDone(TypedDict):
    type: Literal["response.reasoning_summary_text.done"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    text: str


class SummaryPartDone(TypedDict):
    type: Literal["response.reasoning_summary_part.done"]
    sequence_number: int
    item_id: str
    output_index: int
    summary_index: int
    part: SummaryText


class FunctionArgumentsDelta(TypedDict):
    type: Literal["response.function_call_arguments.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class FunctionArgumentsDone(TypedDict):
    type: Literal["response.function_call_arguments.done"]
    sequence_number: int
    item_id: str
    output_index: int
    arguments: str


class CustomInputDelta(TypedDict):
    type: Literal["response.custom_tool_call_input.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class CustomInputDone(TypedDict):
    type: Literal["response.custom_tool_call_input.done"]
    sequence_number: int
    item_id: str
    output_index: int
    input: str


class CodeCallInProgress(TypedDict):
    type: Literal["response.code_interpreter_call.in_progress"]
    sequence_number: int
    item_id: str
    output_index: int


class CodeDelta(TypedDict):
    type: Literal["response.code_interpreter_call_code.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class CodeDone(TypedDict):
    type: Literal["response.code_interpreter_call_code.done"]
    sequence_number: int
    item_id: str
    output_index: int
    code: str


class CodeCallInterpreting(TypedDict):
    type: Literal["response.code_interpreter_call.interpreting"]
    sequence_number: int
    item_id: str
    output_index: int


class CodeCallCompleted(TypedDict):
    type: Literal["response.code_interpreter_call.completed"]
    sequence_number: int
    item_id: str
    output_index: int


McpItemEventType = Literal[
    "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "response.mcp_call.in_progress",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
]


class McpItemEvent(TypedDict):
    """The MCP events that only name their item: listing and call progress (`ResponseMcp*Event`)."""

    type: McpItemEventType
    sequence_number: int
    item_id: str
    output_index: int


WebSearchEventType = Literal[
    "response.web_search_call.in_progress",
    "response.web_search_call.searching",
    "response.web_search_call.completed",
]


class WebSearchEvent(TypedDict):
    """A web search's progress (`ResponseWebSearchCall*Event`): they only name their item."""

    type: WebSearchEventType
    sequence_number: int
    item_id: str
    output_index: int


FileSearchEventType = Literal[
    "response.file_search_call.in_progress",
    "response.file_search_call.searching",
    "response.file_search_call.completed",
]


class FileSearchEvent(TypedDict):
    """A file search's progress (`ResponseFileSearchCall*Event`): they only name their item."""

    type: FileSearchEventType
    sequence_number: int
    item_id: str
    output_index: int


class McpArgumentsDelta(TypedDict):
    type: Literal["response.mcp_call_arguments.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class McpArgumentsDone(TypedDict):
    type: Literal["response.mcp_call_arguments.done"]
    sequence_number: int
    item_id: str
    output_index: int
    arguments: str


class CompactionCompacting(TypedDict):
    type: Literal["response.compaction.compacting"]
    sequence_number: int
    item_id: str
    output_index: int


class ShellCommandAdded(TypedDict):
    type: Literal["response.shell_call_command.added"]
    sequence_number: int
    output_index: int
    command_index: int
    command: str


class ShellCommandDelta(TypedDict):
    type: Literal["response.shell_call_command.delta"]
    sequence_number: int
    output_index: int
    command_index: int
    delta: str


class ShellCommandDone(TypedDict):
    type: Literal["response.shell_call_command.done"]
    sequence_number: int
    output_index: int
    command_index: int
    command: str


Event = Union[
    ResponseLifecycle,
    OutputItemAdded,
    OutputItemDone,
    ContentPartAdded,
    ContentPartDone,
    TextDelta,
    TextDone,
    AnnotationAdded,
    ReasoningTextDelta,
    ReasoningTextDone,
    SummaryPartAdded,
    SummaryTextDelta,
    SummaryTextDone,
    SummaryPartDone,
    FunctionArgumentsDelta,
    FunctionArgumentsDone,
    CustomInputDelta,
    CustomInputDone,
    CodeCallInProgress,
    CodeDelta,
    CodeDone,
    CodeCallInterpreting,
    CodeCallCompleted,
    McpItemEvent,
    McpArgumentsDelta,
    McpArgumentsDone,
    WebSearchEvent,
    FileSearchEvent,
    ShellCommandAdded,
    ShellCommandDelta,
    ShellCommandDone,
    CompactionCompacting,
]

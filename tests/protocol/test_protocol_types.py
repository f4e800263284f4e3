"""Our output TypedDicts (`protocol/items.py`, `protocol/events.py`) agree with the `openai` SDK's models."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from openai.types.responses import (
    Response,
    ResponseApplyPatchToolCall,
    ResponseCodeInterpreterToolCall,
    ResponseCompactionItem,
    ResponseCustomToolCall,
    ResponseFileSearchToolCall,
    ResponseFunctionShellToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseStreamEvent,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
    ResponseUsage,
)
from openai.types.responses.response import Conversation as ResponseConversation
from openai.types.responses.response_code_interpreter_tool_call import OutputImage, OutputLogs
from openai.types.responses.response_file_search_tool_call import Result as FileSearchResult
from openai.types.responses.response_output_item import (
    LocalShellCall,
    McpApprovalRequest,
    McpCall,
    McpListTools,
    McpListToolsTool,
)
from openai.types.responses.response_output_text import (
    AnnotationContainerFileCitation,
    AnnotationFileCitation,
    AnnotationURLCitation,
)
from openai.types.responses.response_reasoning_item import Summary as ReasoningSummary
from openai.types.responses.response_status import ResponseStatus as SDKResponseStatus
from pydantic import BaseModel

from tests.support.wire import RESPONSE_EXTRAS
from vllm_responses.protocol import events, items
from vllm_responses.protocol.status import END_EVENTS, TERMINAL, TERMINAL_EVENTS, UNFINISHED, ResponseStatus

# Fields we send beyond the SDK's model, each for a reason documented where the TypedDict is defined.
EXTRAS: dict[str, set[str]] = {"ResponseObject": set(RESPONSE_EXTRAS)}

ITEM_MODELS: list[tuple[Any, type[BaseModel]]] = [
    (items.MessageItem, ResponseOutputMessage),
    (items.OutputText, ResponseOutputText),
    (items.ContainerFileCitation, AnnotationContainerFileCitation),
    (items.ReasoningItem, ResponseReasoningItem),
    (items.FunctionCallItem, ResponseFunctionToolCall),
    (items.CustomToolCallItem, ResponseCustomToolCall),
    (items.CodeInterpreterCallItem, ResponseCodeInterpreterToolCall),
    (items.LogsOutput, OutputLogs),
    (items.ImageOutput, OutputImage),
    (items.CompactionItem, ResponseCompactionItem),
    (items.ResponseUsage, ResponseUsage),
    (items.ResponseObject, Response),
    (items.ConversationRef, ResponseConversation),
    (items.McpListToolsItem, McpListTools),
    (items.McpListToolsTool, McpListToolsTool),
    (items.McpCallItem, McpCall),
    (items.McpApprovalRequestItem, McpApprovalRequest),
    (items.ShellCallItem, ResponseFunctionShellToolCall),
    (items.LocalShellCallItem, LocalShellCall),
    (items.ApplyPatchCallItem, ResponseApplyPatchToolCall),
    (items.WebSearchCallItem, ResponseFunctionWebSearch),
    (items.UrlCitation, AnnotationURLCitation),
    (items.FileCitation, AnnotationFileCitation),
    (items.FileSearchCallItem, ResponseFileSearchToolCall),
    (items.FileSearchResult, FileSearchResult),
    (items.SummaryText, ReasoningSummary),
    (items.ToolSearchCallItem, ResponseToolSearchCall),
    (items.ToolSearchOutputItem, ResponseToolSearchOutputItem),
]


def _sdk_events() -> dict[str, type[BaseModel]]:
    union = typing.get_args(ResponseStreamEvent)[0]
    return {typing.get_args(cls.model_fields["type"].annotation)[0]: cls for cls in typing.get_args(union)}


def _our_events() -> list[tuple[str, Any]]:
    out = []
    for td in typing.get_args(events.Event):
        for literal in typing.get_args(typing.get_type_hints(td)["type"]):
            out.append((literal, td))
    return out


def _check(td: Any, model: type[BaseModel]) -> None:
    ours = set(typing.get_type_hints(td))
    theirs = set(model.model_fields)
    required = {name for name, f in model.model_fields.items() if f.is_required()}
    assert ours - theirs == EXTRAS.get(td.__name__, set()), f"{td.__name__}: fields the SDK does not know"
    assert required <= ours, f"{td.__name__} lacks the SDK's required {sorted(required - ours)}"


@pytest.mark.parametrize(("td", "model"), ITEM_MODELS, ids=lambda v: getattr(v, "__name__", ""))
def test_items_match_the_sdk(td: Any, model: type[BaseModel]) -> None:
    _check(td, model)


def test_every_event_type_matches_its_sdk_model() -> None:
    sdk = _sdk_events()
    ours = _our_events()
    assert (
        len(ours) == 46
    )  # the lifecycle TypedDict covers six types (queued too), the MCP item events six, web search three,
    # file search three, reasoning summaries four, shell commands three, compaction one
    for literal, td in ours:
        assert literal in sdk, literal
        _check(td, sdk[literal])


def test_the_checker_catches_a_wrong_field() -> None:
    """The check above fails on a TypedDict with a misspelt field (so it is not vacuous)."""

    class Broken(typing.TypedDict):
        type: str
        sequence_number: int
        item_id: str
        output_indx: int

    with pytest.raises(AssertionError):
        _check(Broken, _sdk_events()["response.code_interpreter_call.completed"])


def test_statuses_match_the_sdk_and_each_other() -> None:
    """One status per SDK value; every status is either unfinished or terminal; each terminal status but
    `cancelled` has its ending event, and those are the lifecycle events that end a stream."""
    assert {s.value for s in ResponseStatus} == set(typing.get_args(SDKResponseStatus))
    assert set(TERMINAL) | set(UNFINISHED) == set(ResponseStatus) and not set(TERMINAL) & set(UNFINISHED)
    assert set(END_EVENTS) == set(TERMINAL) - {ResponseStatus.CANCELLED}
    assert set(END_EVENTS.values()) == TERMINAL_EVENTS < set(typing.get_args(events.LifecycleType))

"""Typed shapes of what a response holds: its output items and the response object itself.

TypedDicts rather than models: the builder keeps and updates these dicts as a response streams (no
per-token validation cost), and mypy checks every literal and key against them. Each mirrors the
`openai.types.responses` model of the same name; `tests/protocol/test_protocol_types.py` keeps them in step.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union, cast

from typing_extensions import NotRequired

from vllm_responses.protocol.status import ResponseStatus

__all__ = [
    "Annotation",
    "ApplyPatchCallItem",
    "CodeInterpreterCallItem",
    "CodingCallItem",
    "CodeOutput",
    "CompactionItem",
    "ContainerFileCitation",
    "ConversationRef",
    "CustomToolCallItem",
    "FileCitation",
    "FileSearchCallItem",
    "FileSearchResult",
    "FunctionCallItem",
    "ImageOutput",
    "InputTokensDetails",
    "ItemStatus",
    "LocalShellCallItem",
    "LogsOutput",
    "McpApprovalRequestItem",
    "McpCallItem",
    "McpListToolsItem",
    "McpListToolsTool",
    "MessageItem",
    "OutputItem",
    "OutputLogprob",
    "OutputText",
    "OutputTopLogprob",
    "OutputTokensDetails",
    "ReasoningItem",
    "ReasoningContent",
    "ResponseEcho",
    "ResponseError",
    "ResponseObject",
    "ResponseUsage",
    "SEARCH_RESULTS",
    "SearchActionType",
    "ShellCallItem",
    "SummaryText",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "UrlCitation",
    "WebSearchCallItem",
    "public_item",
    "wire_item",
    "wire_items",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
CodeStatus = Literal["in_progress", "completed", "incomplete", "interpreting", "failed"]


class ContainerFileCitation(TypedDict):
    """`response_output_text.AnnotationContainerFileCitation`"""

    type: Literal["container_file_citation"]
    container_id: str
    file_id: str
    filename: str
    start_index: int
    end_index: int


class UrlCitation(TypedDict):
    """`response_output_text.AnnotationURLCitation`: a web search result the text mentions"""

    type: Literal["url_citation"]
    url: str
    title: str
    start_index: int
    end_index: int


class FileCitation(TypedDict):
    """`response_output_text.AnnotationFileCitation`: a file search result the text cites (by its file id)"""

    type: Literal["file_citation"]
    file_id: str
    filename: str
    index: int


Annotation = Union[ContainerFileCitation, UrlCitation, FileCitation]


class OutputTopLogprob(TypedDict):
    """`ResponseOutputText`'s `LogprobTopLogprob`: a likely token at one place (`bytes`: its UTF-8)."""

    token: str
    bytes: list[int]
    logprob: float


class OutputLogprob(TypedDict):
    """`ResponseOutputText`'s `Logprob`: one output token's, and the most likely ones at its place."""

    token: str
    bytes: list[int]
    logprob: float
    top_logprobs: list[OutputTopLogprob]


class OutputText(TypedDict):
    """`ResponseOutputText`"""

    type: Literal["output_text"]
    text: str
    annotations: list[Annotation]
    logprobs: list[OutputLogprob]


class MessageItem(TypedDict):
    """`ResponseOutputMessage`"""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    status: ItemStatus
    content: list[OutputText]


class ReasoningContent(TypedDict):
    """`response_reasoning_item.Content`"""

    type: Literal["reasoning_text"]
    text: str


class SummaryText(TypedDict):
    """`response_reasoning_item.Summary`"""

    type: Literal["summary_text"]
    text: str


class ReasoningItem(TypedDict):
    """`ResponseReasoningItem`"""

    id: str
    type: Literal["reasoning"]
    summary: list[SummaryText]
    status: ItemStatus
    content: list[ReasoningContent]
    encrypted_content: NotRequired[str]


class FunctionCallItem(TypedDict):
    """`ResponseFunctionToolCall`"""

    id: str
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    status: ItemStatus
    namespace: NotRequired[str]  # a namespaced function's


class CustomToolCallItem(TypedDict):
    """`ResponseCustomToolCall` (which has no `status`)"""

    id: str
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    namespace: NotRequired[str]  # a namespaced custom tool's


class LogsOutput(TypedDict):
    """`response_code_interpreter_tool_call.OutputLogs`"""

    type: Literal["logs"]
    logs: str


class ImageOutput(TypedDict):
    """`response_code_interpreter_tool_call.OutputImage`"""

    type: Literal["image"]
    url: str


CodeOutput = Union[LogsOutput, ImageOutput]


class CodeInterpreterCallItem(TypedDict):
    """`ResponseCodeInterpreterToolCall`"""

    id: str
    type: Literal["code_interpreter_call"]
    code: str
    container_id: str
    status: CodeStatus
    outputs: list[CodeOutput] | None


class CompactionItem(TypedDict):
    """`ResponseCompactionItem`: a summary of earlier items the served model wrote, sealed (compaction.py)."""

    id: str
    type: Literal["compaction"]
    encrypted_content: str


class McpListToolsTool(TypedDict):
    """`response_output_item.McpListToolsTool`"""

    name: str
    input_schema: dict[str, Any]
    description: str | None
    annotations: dict[str, Any] | None


class McpListToolsItem(TypedDict):
    """`response_output_item.McpListTools`: the tools an MCP server listed (`error` when listing failed)."""

    id: str
    type: Literal["mcp_list_tools"]
    server_label: str
    tools: list[McpListToolsTool]
    error: str | None


McpCallStatus = Literal["in_progress", "completed", "incomplete", "calling", "failed"]


class McpCallItem(TypedDict):
    """`response_output_item.McpCall` (`error`: one of the SDK's `McpToolCallError` objects)."""

    id: str
    type: Literal["mcp_call"]
    server_label: str
    name: str
    arguments: str
    output: str | None
    error: dict[str, Any] | None
    status: McpCallStatus
    approval_request_id: str | None


class McpApprovalRequestItem(TypedDict):
    """`response_output_item.McpApprovalRequest`: a call waiting for the client's `mcp_approval_response`."""

    id: str
    type: Literal["mcp_approval_request"]
    server_label: str
    name: str
    arguments: str


class ShellCallItem(TypedDict):
    """`ResponseFunctionShellToolCall` (a local shell: the client runs `action.commands`)"""

    id: str
    type: Literal["shell_call"]
    call_id: str
    action: dict[str, Any]  # commands, timeout_ms, max_output_length
    status: ItemStatus


class LocalShellCallItem(TypedDict):
    """`response_output_item.LocalShellCall`"""

    id: str
    type: Literal["local_shell_call"]
    call_id: str
    action: dict[str, Any]  # type "exec", command, env, timeout_ms, working_directory
    status: ItemStatus


class ApplyPatchCallItem(TypedDict):
    """`ResponseApplyPatchToolCall`"""

    id: str
    type: Literal["apply_patch_call"]
    call_id: str
    operation: dict[str, Any]  # type create_file / update_file / delete_file, path, diff
    status: Literal["in_progress", "completed"]


# A `web_search_call`'s `action.type`: a search, or a result's page opened or searched (tools/web_pages.py).
SearchActionType = Literal["search", "open_page", "find_in_page"]


class WebSearchCallItem(TypedDict):
    """`ResponseFunctionWebSearch` (a search the server ran: tools/web_search.py, or a page it opened)"""

    id: str
    type: Literal["web_search_call"]
    status: Literal["in_progress", "searching", "completed", "failed", "incomplete"]
    # type "search", query, and (include `web_search_call.action.sources`) sources; "open_page", url;
    # "find_in_page", url and pattern
    action: dict[str, Any]


class FileSearchResult(TypedDict):
    """`response_file_search_tool_call.Result`: one chunk a file search found"""

    file_id: str
    filename: str
    score: float
    text: str
    attributes: dict[str, Any]


class FileSearchCallItem(TypedDict):
    """`ResponseFileSearchToolCall` (a search the server ran: tools/file_search.py); the server's copy always
    holds its `results`, which go out only with the include `file_search_call.results`"""

    id: str
    type: Literal["file_search_call"]
    queries: list[str]
    status: Literal["in_progress", "searching", "completed", "failed", "incomplete"]
    results: list[FileSearchResult] | None


class ToolSearchCallItem(TypedDict):
    """`ResponseToolSearchCall`"""

    id: str
    type: Literal["tool_search_call"]
    call_id: str
    arguments: Any
    execution: Literal["server", "client"]
    status: ItemStatus


class ToolSearchOutputItem(TypedDict):
    """`ResponseToolSearchOutputItem`: the tools a server-run search found (loaded from here on)"""

    id: str
    type: Literal["tool_search_output"]
    call_id: str
    execution: Literal["server", "client"]
    status: ItemStatus
    tools: list[dict[str, Any]]


# The calls of the coding agents' client-run tools (tools/shell_patch.py).
CodingCallItem = Union[ShellCallItem, LocalShellCallItem, ApplyPatchCallItem]

OutputItem = Union[
    MessageItem,
    ReasoningItem,
    FunctionCallItem,
    CustomToolCallItem,
    CodeInterpreterCallItem,
    CompactionItem,
    McpListToolsItem,
    McpCallItem,
    McpApprovalRequestItem,
    ShellCallItem,
    LocalShellCallItem,
    ApplyPatchCallItem,
    WebSearchCallItem,
    FileSearchCallItem,
    ToolSearchCallItem,
    ToolSearchOutputItem,
]


class InputTokensDetails(TypedDict):
    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(TypedDict):
    reasoning_tokens: int


class ResponseUsage(TypedDict):
    """`ResponseUsage`"""

    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponseError(TypedDict):
    """`ResponseError` (`code` is one of the SDK's fixed codes: see `errors.failure_code`)."""

    code: str
    message: str


class ConversationRef(TypedDict):
    """`response.Conversation`"""

    id: str


class ResponseEcho(TypedDict):
    """The request's settings as a response echoes them back (the service resolves them from the request)."""

    model: str
    instructions: str | None
    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any]
    parallel_tool_calls: bool
    temperature: float
    top_p: float
    max_output_tokens: int | None
    max_tool_calls: int | None
    previous_response_id: str | None
    metadata: dict[str, str]
    background: bool
    text: dict[str, Any]
    truncation: Literal["auto", "disabled"]
    user: str | None
    reasoning: dict[str, Any] | None
    top_logprobs: int
    service_tier: Literal["default"]
    safety_identifier: str | None
    prompt_cache_key: str | None
    conversation: NotRequired[ConversationRef]  # only when the request named one
    # Beyond the openai types (which do not declare them; its `Response` keeps them as extras), as Open
    # Responses requires and OpenAI's API sends them; tests/support/wire.py allows exactly these three.
    store: bool
    presence_penalty: float
    frequency_penalty: float


class ResponseObject(ResponseEcho):
    """`Response`: the fields the builder owns, and the echoed settings."""

    id: str
    object: Literal["response"]
    created_at: int
    status: ResponseStatus
    completed_at: int | None
    error: ResponseError | None
    incomplete_details: dict[str, str] | None
    output: list[OutputItem]
    usage: ResponseUsage | None


# The server's own key on its copy of a `web_search_call` item (its history, a conversation's items, a stored
# input): the results as the model read them, so that the item given back later reads to the model as it did
# the first time. Never sent: `public_item` drops it.
SEARCH_RESULTS = "_search_results"


def public_item(item: dict[str, Any]) -> dict[str, Any]:
    """An item without what only the server keeps of it (a web search's results as the model read them)."""
    if SEARCH_RESULTS in item:
        return {k: v for k, v in item.items() if k != SEARCH_RESULTS}
    return item


def wire_item(
    item: OutputItem, include_outputs: bool, include_sources: bool = False, include_results: bool = False
) -> OutputItem:
    """An item as it goes out: code-interpreter `outputs` blanked to null unless the client asked for them
    (`include=["code_interpreter_call.outputs"]`), a web search's `action.sources` left out unless it did
    (`web_search_call.action.sources`), a file search's `results` null unless it did
    (`file_search_call.results`), and nothing only the server keeps (`public_item`). The one place those
    rules are applied."""
    if item["type"] == "code_interpreter_call" and not include_outputs:
        return {**item, "outputs": None}
    if item["type"] == "file_search_call" and not include_results:
        return {**item, "results": None}
    if item["type"] == "web_search_call":
        item = cast(WebSearchCallItem, public_item(cast(dict[str, Any], item)))
        if not include_sources and "sources" in item["action"]:
            return {**item, "action": {k: v for k, v in item["action"].items() if k != "sources"}}
    return item


def wire_items(
    items: list[OutputItem],
    include_outputs: bool,
    include_sources: bool = False,
    include_results: bool = False,
) -> list[OutputItem]:
    return [wire_item(item, include_outputs, include_sources, include_results) for item in items]

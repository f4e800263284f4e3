"""The tool calls of one model call while they stream: one record per kind of call, each with its own steps.

A call is one kind of `OpenCall` from its start, chosen by the name the model called; each kind holds what it
needs and turns its argument deltas (`delta`) and its end (`end`) into the builder's events. `CallTracker`
starts them, feeds them the parser's deltas, and, once the model call has ended, sorts the ended ones by who
runs them: the server (code, web and file searches, a server-run tool search, MCP calls) or the client
(function, custom and coding-tool calls, a client-run tool search, MCP approval requests).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from interpreter_service import InterpreterError
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.file_results import FILE_SEARCH_NAME
from vllm_responses.context.searches import SEARCH_ACTIONS
from vllm_responses.engine.parsers.partial_json import JsonStringField
from vllm_responses.engine.parsers.partial_list import JsonStringListField
from vllm_responses.engine.types import CUSTOM_INPUT_KEY, FinishReason, ToolCallDelta, ToolCallStart, ToolSpec
from vllm_responses.protocol.events import Event
from vllm_responses.tools.code_interpreter import CodeCall, CodeContainer
from vllm_responses.tools.shell_patch import coding_call_item
from vllm_responses.tools.tool_search import TOOL_SEARCH_NAME

if TYPE_CHECKING:
    from vllm_responses.tools.mcp import McpRoute

__all__ = [
    "CallTracker",
    "ClientToolSearch",
    "CodingCall",
    "CustomCall",
    "FileSearchCall",
    "FunctionCall",
    "McpApproval",
    "McpCall",
    "OpenCall",
    "ServerToolSearch",
    "ShellCall",
    "WebSearchCall",
    "custom_input",
]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Call:
    """What every kind has: the name the model called and its arguments so far (the tracker adds them)."""

    name: str
    arguments: str = field(default="", kw_only=True)

    def delta(self, builder: ResponseBuilder, arguments: str) -> list[Event]:
        """Nothing streams: the call's item is made, or the call run, once its arguments end."""
        return []

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return []


@dataclass(eq=False)
class FunctionCall(_Call):
    """A function_call item (the client answers it), its arguments streamed as they come."""

    index: int

    def delta(self, builder: ResponseBuilder, arguments: str) -> list[Event]:
        return builder.calls.function_call_delta(self.index, arguments)

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return builder.calls.function_call_done(self.index, normalize_arguments(self.arguments))


@dataclass(eq=False)
class CustomCall(_Call):
    """A custom_tool_call item (the client answers it), its `input` decoded from `{"input": "..."}` as it
    streams."""

    index: int
    decoder: JsonStringField = field(default_factory=lambda: JsonStringField(CUSTOM_INPUT_KEY))

    def delta(self, builder: ResponseBuilder, arguments: str) -> list[Event]:
        text = self.decoder.feed(arguments)
        return builder.calls.custom_call_delta(self.index, text) if text else []

    def end(self, builder: ResponseBuilder) -> list[Event]:
        rest = self.decoder.finish() if self.decoder.value else custom_input(self.arguments)
        streamed = builder.calls.custom_call_delta(self.index, rest) if rest else []
        return streamed + builder.calls.custom_call_done(self.index)


@dataclass(eq=False)
class ShellCall(_Call):
    """A shell_call item (the client runs it), added at once, its commands streamed as they are decoded."""

    index: int
    commands: JsonStringListField = field(default_factory=lambda: JsonStringListField("commands"))

    def delta(self, builder: ResponseBuilder, arguments: str) -> list[Event]:
        events: list[Event] = []
        for command_index, text, closed in self.commands.feed(arguments):
            events += builder.calls.shell_command(self.index, command_index, text, closed=closed)
        return events

    def end(self, builder: ResponseBuilder) -> list[Event]:
        item = coding_call_item("shell_call", self.arguments)
        assert item["type"] == "shell_call"
        return builder.calls.shell_call_done(self.index, item, self.commands.closed)


@dataclass(eq=False)
class CodingCall(_Call):
    """A coding tool's call (`local_shell_call`, `apply_patch_call`; the client runs it), its item made whole
    once its arguments end."""

    call_type: str

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return builder.calls.coding_call(coding_call_item(self.call_type, self.arguments))[1]


@dataclass(eq=False)
class ClientToolSearch(_Call):
    """A tool search the client runs: its tool_search_call item, made once its arguments end, the client
    answers with a tool_search_output."""

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return builder.calls.tool_search(_json_or_text(self.arguments), None, execution="client")[1]


@dataclass(eq=False)
class ServerToolSearch(_Call):
    """A tool search the server runs, once the model call ends (its items made then)."""


@dataclass(eq=False)
class WebSearchCall(_Call):
    """A web_search_call item, added at once; the server runs the search once the model call ends."""

    index: int


@dataclass(eq=False)
class FileSearchCall(_Call):
    """A file_search_call item, added at once; the server runs the search once the model call ends."""

    index: int


@dataclass(eq=False)
class McpCall(_Call):
    """An mcp_call item the server runs once the model call ends, its arguments streamed as they come."""

    index: int
    route: McpRoute

    def delta(self, builder: ResponseBuilder, arguments: str) -> list[Event]:
        return builder.mcp.call_delta(self.index, arguments)

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return builder.mcp.call_arguments_done(self.index, normalize_arguments(self.arguments))


@dataclass(eq=False)
class McpApproval(_Call):
    """An mcp_approval_request item (the client approves or denies), its arguments given whole at its end."""

    index: int
    route: McpRoute

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return builder.mcp.approval_done(self.index, normalize_arguments(self.arguments))


OpenCall = (
    CodeCall
    | FunctionCall
    | CustomCall
    | ShellCall
    | CodingCall
    | ClientToolSearch
    | ServerToolSearch
    | WebSearchCall
    | FileSearchCall
    | McpCall
    | McpApproval
)
# The kinds whose calls the client answers: the response ends with them.
CLIENT_ANSWERED = (FunctionCall, CustomCall, ShellCall, CodingCall, ClientToolSearch)

K = TypeVar("K", bound=OpenCall)


class CallTracker:
    """Turns the parser's call deltas into output items and their events, for one model call.

    Parameters
    ----------
    builder: the response's event builder.
    code_names: tool names that are the code interpreter (their calls become code_interpreter_call items).
    container: the response's code container (None when the response has no code interpreter), asked for
        its container id as a code call starts. When it raises an `InterpreterError` (none could be had in
        time), the call's item gets an empty `container_id` and the error, which the agent loop gives the
        model as the call's output instead of running the code; a later code call of this model call does
        not wait again.
    client_tools: the function and custom tools offered, by the name the model calls them (a custom tool's
        calls become custom_tool_call items; a namespaced tool's items carry its namespace and own name; a
        coding tool's, its call type's item). A call of a name not offered becomes a function_call item
        under that name.
    mcp_routes: the remote MCP tools offered, by name (their calls become mcp_call items, or
        mcp_approval_request items when the call waits for the client's approval).
    search_names: the names the web search and its page actions are offered under (their calls become
        web_search_call items, run by the loop once the model call ends).
    tool_search: who runs the tool search, when it is offered ("server": the loop, once the model call
        ends; "client": its call becomes a tool_search_call item the client answers).
    file_search: whether the file search is offered (its calls become file_search_call items, run by the
        loop once the model call ends).
    """

    def __init__(
        self,
        builder: ResponseBuilder,
        code_names: frozenset[str],
        container: CodeContainer | None,
        client_tools: Mapping[str, ToolSpec] | None = None,
        mcp_routes: Mapping[str, McpRoute] | None = None,
        search_names: frozenset[str] = frozenset(),
        tool_search: str | None = None,
        file_search: bool = False,
    ) -> None:
        self.builder = builder
        self.mcp_routes = mcp_routes or {}
        self.code_names = code_names
        self.client_tools = client_tools or {}
        self.search_names = search_names
        self.tool_search = tool_search
        self.file_search = file_search
        self.container = container
        self._open: dict[int, OpenCall] = {}  # by the parser's call index
        self.ended: list[OpenCall] = []  # in the order they ended
        self.finish_reason: FinishReason | None = None  # set when the model call's stream has ended
        self._container_error: str | None = None  # once no container could be had, no second wait

    def _ended(self, kind: type[K]) -> list[K]:
        return [c for c in self.ended if isinstance(c, kind)]

    @property
    def code_calls(self) -> list[CodeCall]:
        return self._ended(CodeCall)

    @property
    def function_calls(self) -> list[OpenCall]:
        """The calls the client answers: function, custom and coding tool calls, client-run tool searches."""
        return [c for c in self.ended if isinstance(c, CLIENT_ANSWERED)]

    @property
    def tool_searches(self) -> list[ServerToolSearch]:
        """The tool searches the server runs now."""
        return self._ended(ServerToolSearch)

    @property
    def search_calls(self) -> list[WebSearchCall]:
        """The web searches the server runs now."""
        return self._ended(WebSearchCall)

    @property
    def file_searches(self) -> list[FileSearchCall]:
        """The file searches the server runs now."""
        return self._ended(FileSearchCall)

    @property
    def mcp_calls(self) -> list[McpCall]:
        """The MCP calls the server runs now (those needing no approval)."""
        return self._ended(McpCall)

    @property
    def approval_requests(self) -> list[McpApproval]:
        """The MCP calls that wait for the client's approval (the response ends with them)."""
        return self._ended(McpApproval)

    async def start(self, event: ToolCallStart) -> list[Event]:
        """A call begins: its kind chosen by the name called, its item added (for the kinds added at once)."""
        name, calls = event.name, self.builder.calls
        events: list[Event] = []
        call: OpenCall
        if name in self.code_names and self.container is not None:
            call, events = await self._code_call(name)
        elif name == TOOL_SEARCH_NAME and self.tool_search is not None:
            call = ServerToolSearch(name) if self.tool_search == "server" else ClientToolSearch(name)
        elif name == FILE_SEARCH_NAME and self.file_search:
            index, events = self.builder.file_search.start()
            call = FileSearchCall(name, index)
        elif name in self.search_names:
            index, events = self.builder.web_search.start(SEARCH_ACTIONS.get(name, "search"))
            call = WebSearchCall(name, index)
        elif (route := self.mcp_routes.get(name)) is not None and route.approval:
            index, events = self.builder.mcp.approval_start(route.server_label, name)
            call = McpApproval(name, index, route)
        elif route is not None:
            index, events = self.builder.mcp.call_start(route.server_label, name)
            call = McpCall(name, index, route)
        elif (spec := self.client_tools.get(name)) is not None and spec.call_type == "shell_call":
            index, events = calls.shell_call_start()
            call = ShellCall(name, index)
        elif spec is not None and spec.call_type is not None:
            call = CodingCall(name, spec.call_type)
        elif spec is not None and spec.custom:
            index, events = calls.custom_call_start(spec.item_name, spec.namespace)
            call = CustomCall(name, index)
        else:  # a function, or a name not offered (a function_call under that name)
            item_name, namespace = (spec.item_name, spec.namespace) if spec is not None else (name, None)
            index, events = calls.function_call_start(item_name, namespace)
            call = FunctionCall(name, index)
        self._open[event.index] = call
        return events

    async def _code_call(self, name: str) -> tuple[CodeCall, list[Event]]:
        """A code call begins: the response's container asked for (no second wait once none could be had),
        then its item added."""
        assert self.container is not None
        container_id = ""
        if self._container_error is None:
            try:
                container_id = await self.container.get()
            except InterpreterError as exc:
                logger.warning("a code call got no container: %s", exc)
                self._container_error = f"The code was not run: {exc}."
        index, events = self.builder.calls.code_start(container_id)
        item_id = self.builder.state.code_call(index)["id"]
        error = None if container_id else self._container_error
        return CodeCall(name, index, item_id, container_id, error), events

    def delta(self, event: ToolCallDelta) -> list[Event]:
        call = self._open.get(event.index)
        if call is None:
            return []
        call.arguments += event.arguments
        return call.delta(self.builder, event.arguments)

    def end(self, parser_index: int) -> list[Event]:
        call = self._open.get(parser_index)
        if call is None or any(c is call for c in self.ended):
            return []
        self.ended.append(call)
        return call.end(self.builder)

    def close_dangling(self) -> list[Event]:
        """End the calls the parser opened but never closed (the output was cut off)."""
        events: list[Event] = []
        for parser_index in list(self._open):
            events += self.end(parser_index)
        return events


def custom_input(arguments: str) -> str:
    """A custom call's input when its arguments held no `input` string: the one string value of the object
    the model wrote (under another key), else the arguments text itself."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), str):
        return str(next(iter(value.values())))
    return value if isinstance(value, str) else arguments


def normalize_arguments(arguments: str) -> str:
    """Arguments as compact JSON object text when they parse; as given otherwise."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(value) if isinstance(value, dict) else arguments


def _json_or_text(arguments: str) -> Any:
    """A call's arguments as the JSON value they hold (the text itself when they hold none)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments

"""The tool calls of one model call while it streams: start, argument deltas, end, and closing the dangling ones."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interpreter_service import InterpreterError
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.file_results import FILE_SEARCH_NAME
from vllm_responses.context.searches import SEARCH_ACTIONS
from vllm_responses.engine.parsers.partial_json import JsonStringField
from vllm_responses.engine.parsers.partial_list import JsonStringListField
from vllm_responses.engine.types import CUSTOM_INPUT_KEY, FinishReason, ToolCallDelta, ToolCallStart, ToolSpec
from vllm_responses.protocol.events import Event
from vllm_responses.tools.shell_patch import coding_call_item
from vllm_responses.tools.tool_search import TOOL_SEARCH_NAME

if TYPE_CHECKING:
    from vllm_responses.tools.mcp import McpRoute

__all__ = ["CallTracker", "OpenCall", "custom_input"]

logger = logging.getLogger(__name__)


@dataclass
class OpenCall:
    """One call's item while its arguments stream in."""

    index: int  # output_index of the item
    name: str
    code: JsonStringField | None = None  # set for code-interpreter calls: decodes the code as it streams
    custom: JsonStringField | None = None  # set for custom tool calls: decodes the input as it streams
    arguments: str = ""
    ended: bool = False
    error: str | None = (
        None  # a code call that got no container: why (the model is told; the code never runs)
    )
    mcp: McpRoute | None = (
        None  # set for calls to a remote MCP tool (an mcp_call or mcp_approval_request item)
    )
    coding: str | None = None  # set for calls to a coding tool: the item type, added when the call ends
    commands: JsonStringListField | None = None  # set for shell calls: decodes the commands as they stream
    search: bool = False  # a web search (run by the server once the model call ends)
    file_search: bool = False  # a file search (run by the server once the model call ends)
    finder: str | None = None  # a tool search: who runs it ("server": the loop, "client"), added when it ends

    @property
    def is_code(self) -> bool:
        return self.code is not None


class CallTracker:
    """Turns the parser's call deltas into output items and their events, for one model call.

    Parameters
    ----------
    builder: the response's event builder.
    code_names: tool names that are the code interpreter (their calls become code_interpreter_call items).
    client_tools: the function and custom tools offered, by the name the model calls them (a custom tool's
        calls become custom_tool_call items, `input` decoded from the `{"input": "..."}` arguments as they
        stream; a namespaced tool's items carry its namespace and own name). A call of a name not offered
        becomes a function_call item under that name.
    mcp_routes: the remote MCP tools offered, by name (their calls become mcp_call items, or
        mcp_approval_request items when the call waits for the client's approval).
    search_names: the names the web search and its page actions are offered under (their calls become
        web_search_call items, run by the loop once the model call ends).
    tool_search: who runs the tool search, when it is offered ("server": the loop, once the model call
        ends; "client": its call becomes a tool_search_call item the client answers).
    file_search: whether the file search is offered (its calls become file_search_call items, run by the
        loop once the model call ends).
    container: gives the container id a code call runs in (creates one on first use, waiting its turn when
        the sandbox is full); None when the response has no code interpreter. When it raises an
        `InterpreterError` (none could be had in time), the call's item gets an empty `container_id` and
        the error, which the agent loop gives the model as the call's output instead of running the code.
    """

    def __init__(
        self,
        builder: ResponseBuilder,
        code_names: frozenset[str],
        container: Callable[[], Awaitable[str]] | None,
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

    @property
    def code_calls(self) -> list[OpenCall]:
        return [c for c in self.ended if c.is_code]

    @property
    def function_calls(self) -> list[OpenCall]:
        """The calls the client answers: function, custom and coding tool calls."""
        return [
            c
            for c in self.ended
            if not c.is_code and c.mcp is None and not (c.search or c.file_search) and c.finder != "server"
        ]

    @property
    def tool_searches(self) -> list[OpenCall]:
        """The tool searches the server runs now."""
        return [c for c in self.ended if c.finder == "server"]

    @property
    def search_calls(self) -> list[OpenCall]:
        """The web searches the server runs now."""
        return [c for c in self.ended if c.search]

    @property
    def file_searches(self) -> list[OpenCall]:
        """The file searches the server runs now."""
        return [c for c in self.ended if c.file_search]

    @property
    def mcp_calls(self) -> list[OpenCall]:
        """The MCP calls the server runs now (those needing no approval)."""
        return [c for c in self.ended if c.mcp is not None and not c.mcp.approval]

    @property
    def approval_requests(self) -> list[OpenCall]:
        """The MCP calls that wait for the client's approval (the response ends with them)."""
        return [c for c in self.ended if c.mcp is not None and c.mcp.approval]

    async def start(self, event: ToolCallStart) -> list[Event]:
        if event.name in self.code_names and self.container is not None:
            container_id = ""
            if self._container_error is None:
                try:
                    container_id = await self.container()
                except InterpreterError as exc:
                    logger.warning("a code call got no container: %s", exc)
                    self._container_error = f"The code was not run: {exc}."
            index, events = self.builder.calls.code_start(container_id)
            call = OpenCall(index, event.name, code=JsonStringField("code"))
            call.error = None if container_id else self._container_error
            self._open[event.index] = call
        elif event.name == TOOL_SEARCH_NAME and self.tool_search is not None:
            self._open[event.index] = OpenCall(-1, event.name, finder=self.tool_search)
            events = []
        elif event.name == FILE_SEARCH_NAME and self.file_search:
            index, events = self.builder.file_search.start()
            self._open[event.index] = OpenCall(index, event.name, file_search=True)
        elif event.name in self.search_names:
            index, events = self.builder.web_search.start(SEARCH_ACTIONS.get(event.name, "search"))
            self._open[event.index] = OpenCall(index, event.name, search=True)
        elif event.name in self.mcp_routes:
            route = self.mcp_routes[event.name]
            if route.approval:
                index, events = self.builder.mcp.approval_start(route.server_label, event.name)
            else:
                index, events = self.builder.mcp.call_start(route.server_label, event.name)
            self._open[event.index] = OpenCall(index, event.name, mcp=route)
        else:
            events = self._client_start(event)
        return events

    def _client_start(self, event: ToolCallStart) -> list[Event]:
        """A call the client answers: a custom_tool_call or function_call item (with its namespace, if any)."""
        spec = self.client_tools.get(event.name)
        name, namespace = (spec.item_name, spec.namespace) if spec is not None else (event.name, None)
        if spec is not None and spec.call_type == "shell_call":  # added now, its commands streamed
            index, events = self.builder.calls.shell_call_start()
            commands = JsonStringListField("commands")
            self._open[event.index] = OpenCall(index, event.name, coding=spec.call_type, commands=commands)
            return events
        if spec is not None and spec.call_type is not None:  # its item is made whole once its arguments end
            self._open[event.index] = OpenCall(-1, event.name, coding=spec.call_type)
            return []
        if spec is not None and spec.custom:
            index, events = self.builder.calls.custom_call_start(name, namespace)
            self._open[event.index] = OpenCall(index, event.name, custom=JsonStringField(CUSTOM_INPUT_KEY))
        else:
            index, events = self.builder.calls.function_call_start(name, namespace)
            self._open[event.index] = OpenCall(index, event.name)
        return events

    def delta(self, event: ToolCallDelta) -> list[Event]:
        call = self._open.get(event.index)
        if call is None:
            return []
        call.arguments += event.arguments
        if call.code is not None:
            text = call.code.feed(event.arguments)
            return self.builder.calls.code_delta(call.index, text) if text else []
        if call.custom is not None:
            text = call.custom.feed(event.arguments)
            return self.builder.calls.custom_call_delta(call.index, text) if text else []
        if call.commands is not None:
            return self._shell_steps(call, call.commands.feed(event.arguments))
        if call.coding is not None or call.search or call.file_search or call.finder:  # made / run at its end
            return []
        if call.mcp is not None:  # an approval request's arguments arrive whole, when it is done
            return [] if call.mcp.approval else self.builder.mcp.call_delta(call.index, event.arguments)
        return self.builder.calls.function_call_delta(call.index, event.arguments)

    def end(self, parser_index: int) -> list[Event]:
        call = self._open.get(parser_index)
        if call is None or call.ended:
            return []
        call.ended = True
        self.ended.append(call)
        if call.code is not None:
            rest = call.code.finish()
            return (
                self.builder.calls.code_delta(call.index, rest) if rest else []
            ) + self.builder.calls.code_done(call.index)
        if call.custom is not None:
            rest = call.custom.finish() if call.custom.value else custom_input(call.arguments)
            return (self.builder.calls.custom_call_delta(call.index, rest) if rest else []) + (
                self.builder.calls.custom_call_done(call.index)
            )
        if call.commands is not None:
            item = coding_call_item("shell_call", call.arguments)
            assert item["type"] == "shell_call"
            return self.builder.calls.shell_call_done(call.index, item, call.commands.closed)
        if call.coding is not None:
            call.index, events = self.builder.calls.coding_call(coding_call_item(call.coding, call.arguments))
            return events
        if call.search or call.file_search or call.finder == "server":  # searched once the model call ends
            return []
        if call.finder == "client":  # the client searches, and answers with a tool_search_output
            _call_id, events = self.builder.calls.tool_search(
                _json_or_text(call.arguments), None, execution="client"
            )
            return events
        if call.mcp is not None:
            arguments = normalize_arguments(call.arguments)
            if call.mcp.approval:
                return self.builder.mcp.approval_done(call.index, arguments)
            return self.builder.mcp.call_arguments_done(call.index, arguments)
        return self.builder.calls.function_call_done(call.index, normalize_arguments(call.arguments))

    def _shell_steps(self, call: OpenCall, steps: list[tuple[int, str, bool]]) -> list[Event]:
        events: list[Event] = []
        for command_index, text, closed in steps:
            events += self.builder.calls.shell_command(call.index, command_index, text, closed=closed)
        return events

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

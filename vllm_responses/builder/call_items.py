"""The builder's tool-call steps: function, custom, coding-tool, tool search and code interpreter calls."""

from __future__ import annotations

import copy
from typing import Any, Literal

from vllm_responses.builder import events as ev
from vllm_responses.builder.core import ResponseState
from vllm_responses.builder.text import OpenText
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    CodeInterpreterCallItem,
    CodeOutput,
    CodingCallItem,
    CustomToolCallItem,
    FunctionCallItem,
    ShellCallItem,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)

__all__ = ["CallSteps"]


class CallSteps:
    """One method per step of a call; each returns the events of its step. A call's start closes the open
    text (`OpenText.start_item`) and returns the call's `output_index`, which its later steps take."""

    def __init__(self, state: ResponseState, text: OpenText) -> None:
        self.state = state
        self.text = text

    # --- function calls -------------------------------------------------------------------------------

    def function_call_start(self, name: str, namespace: str | None = None) -> tuple[int, list[Event]]:
        new: FunctionCallItem = {
            "id": new_id("fc"),
            "type": "function_call",
            "call_id": new_id("call"),
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        if namespace:
            new["namespace"] = namespace
        return self.text.start_item(new)

    def function_call_delta(self, index: int, delta: str) -> list[Event]:
        self.state.function_call(index)["arguments"] += delta
        return [ev.function_arguments_delta(self.state.seq(), self.state.ref(index), delta)]

    def function_call_done(self, index: int, arguments: str | None = None) -> list[Event]:
        item = self.state.function_call(index)
        if arguments is not None:
            item["arguments"] = arguments
        item["status"] = "completed"
        done = ev.function_arguments_done(self.state.seq(), self.state.ref(index), item["arguments"])
        return [done, self.state.item_done(index)]

    # --- custom tool calls ----------------------------------------------------------------------------

    def custom_call_start(self, name: str, namespace: str | None = None) -> tuple[int, list[Event]]:
        new: CustomToolCallItem = {
            "id": new_id("ctc"),
            "type": "custom_tool_call",
            "call_id": new_id("call"),
            "name": name,
            "input": "",
        }
        if namespace:
            new["namespace"] = namespace
        index, events = self.text.start_item(new)
        self.state.open_statusless.add(index)
        return index, events

    def custom_call_delta(self, index: int, delta: str) -> list[Event]:
        self.state.custom_call(index)["input"] += delta
        return [ev.custom_input_delta(self.state.seq(), self.state.ref(index), delta)]

    def custom_call_done(self, index: int) -> list[Event]:
        state = self.state
        state.open_statusless.discard(index)
        done = ev.custom_input_done(state.seq(), state.ref(index), state.custom_call(index)["input"])
        return [done, state.item_done(index)]

    # --- coding tools' calls (shell, local_shell, apply_patch) --------------------------------------

    def _whole(
        self, item: CodingCallItem | ToolSearchCallItem | ToolSearchOutputItem
    ) -> tuple[int, list[Event]]:
        """An item announced whole: added (status `in_progress`), then done as given."""
        announced = copy.copy(item)
        announced["status"] = "in_progress"
        index, events = self.text.start_item(announced)
        self.state.output[index] = item
        return index, [*events, self.state.item_done(index)]

    def coding_call(self, item: CodingCallItem) -> tuple[int, list[Event]]:
        """A coding tool's call, announced whole once the model's call has ended."""
        return self._whole(item)

    def shell_call_start(self) -> tuple[int, list[Event]]:
        """A shell call, added (in progress, no commands yet) as soon as the model starts writing it."""
        new = ShellCallItem(
            id=new_id("sh"),
            type="shell_call",
            call_id=new_id("call"),
            action={"commands": [], "timeout_ms": None, "max_output_length": None},
            status="in_progress",
        )
        return self.text.start_item(new)

    def shell_command(self, index: int, command_index: int, delta: str, *, closed: bool) -> list[Event]:
        """Characters of the call's `command_index`-th command (added when first seen), and its end."""
        state = self.state
        commands: list[str] = self._shell_call(index)["action"]["commands"]
        events: list[Event] = []
        while len(commands) <= command_index:
            commands.append("")
            events.append(ev.shell_command_added(state.seq(), index, len(commands) - 1))
        if delta:
            commands[command_index] += delta
            events.append(ev.shell_command_delta(state.seq(), index, command_index, delta))
        if closed:
            events.append(ev.shell_command_done(state.seq(), index, command_index, commands[command_index]))
        return events

    def shell_call_done(self, index: int, item: ShellCallItem, closed: int) -> list[Event]:
        """The call as its whole arguments read (`item`): the commands not yet closed streamed to their end
        (`closed` of them are), then the item done under the id it was added with."""
        announced = self._shell_call(index)
        sent: list[str] = announced["action"]["commands"]
        events: list[Event] = []
        for i, command in enumerate(item["action"]["commands"]):
            if i < closed:
                continue
            if i < len(sent) and not command.startswith(sent[i]):
                sent[i] = command  # read otherwise whole (arguments cut off): the done event has it so
            so_far = sent[i] if i < len(sent) else ""
            events += self.shell_command(index, i, command[len(so_far) :], closed=True)
        self.state.output[index] = {**item, "id": announced["id"], "call_id": announced["call_id"]}
        return [*events, self.state.item_done(index)]

    def _shell_call(self, index: int) -> ShellCallItem:
        item = self.state.output[index]
        assert item["type"] == "shell_call"
        return item

    # --- tool search (tools/tool_search.py) -------------------------------------------------------------

    def tool_search(
        self, arguments: Any, tools: list[dict[str, Any]] | None, *, execution: Literal["server", "client"]
    ) -> tuple[str, list[Event]]:
        """A tool search call, added whole (in progress) and done (completed), and, run by the server, the
        `tool_search_output` of what it found (`tools`), added and done: the call's `call_id` and events."""
        call_id = new_id("call")
        item: ToolSearchCallItem = {
            "id": new_id("tsc"),
            "type": "tool_search_call",
            "call_id": call_id,
            "arguments": arguments,
            "execution": execution,
            "status": "completed",
        }
        events = self._whole(item)[1]
        if tools is not None:
            found: ToolSearchOutputItem = {
                "id": new_id("tso"),
                "type": "tool_search_output",
                "call_id": call_id,
                "execution": "server",
                "status": "completed",
                "tools": tools,
            }
            events += self._whole(found)[1]
        return call_id, events

    # --- code interpreter calls -----------------------------------------------------------------------

    def code_start(self, container_id: str) -> tuple[int, list[Event]]:
        new: CodeInterpreterCallItem = {
            "id": new_id("ci"),
            "type": "code_interpreter_call",
            "code": "",
            "container_id": container_id,
            "status": "in_progress",
            "outputs": None,
        }
        index, events = self.text.start_item(new)
        return index, [*events, ev.code_call_in_progress(self.state.seq(), self.state.ref(index))]

    def code_delta(self, index: int, delta: str) -> list[Event]:
        self.state.code_call(index)["code"] += delta
        return [ev.code_delta(self.state.seq(), self.state.ref(index), delta)]

    def code_done(self, index: int) -> list[Event]:
        state = self.state
        item = state.code_call(index)
        item["status"] = "interpreting"
        done = ev.code_done(state.seq(), state.ref(index), item["code"])
        return [done, ev.code_call_interpreting(state.seq(), state.ref(index))]

    def code_finished(self, index: int, outputs: list[CodeOutput], *, failed: bool = False) -> list[Event]:
        state = self.state
        item = state.code_call(index)
        item["outputs"] = outputs
        item["status"] = "failed" if failed else "completed"
        if failed:
            return [state.item_done(index)]
        return [ev.code_call_completed(state.seq(), state.ref(index)), state.item_done(index)]

"""The builder's remote-MCP steps: listing a server's tools, a call's arguments and result, approval requests."""

from __future__ import annotations

from typing import Any

from vllm_responses.builder import events as ev
from vllm_responses.builder.core import ResponseState
from vllm_responses.builder.text import OpenText
from vllm_responses.protocol.events import Event, McpItemEventType
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    McpApprovalRequestItem,
    McpCallItem,
    McpListToolsItem,
    McpListToolsTool,
)

__all__ = ["McpSteps"]


class McpSteps:
    """One method per step of an MCP item; each returns the events of its step. A start closes the open
    text (`OpenText.start_item`) and returns the item's `output_index`, which its later steps take."""

    def __init__(self, state: ResponseState, text: OpenText) -> None:
        self.state = state
        self.text = text

    def _progress(self, type_: McpItemEventType, index: int) -> list[Event]:
        return [ev.mcp_item_event(type_, self.state.seq(), self.state.ref(index))]

    # --- listing --------------------------------------------------------------------------------------

    def list_start(self, server_label: str) -> tuple[int, list[Event]]:
        new: McpListToolsItem = {
            "id": new_id("mcpl"),
            "type": "mcp_list_tools",
            "server_label": server_label,
            "tools": [],
            "error": None,
        }
        index, events = self.text.start_item(new)
        self.state.open_statusless.add(index)
        return index, events + self._progress("response.mcp_list_tools.in_progress", index)

    def list_done(self, index: int, tools: list[McpListToolsTool], error: str | None) -> list[Event]:
        item = self.state.output[index]
        assert item["type"] == "mcp_list_tools"
        item["tools"], item["error"] = tools, error
        self.state.open_statusless.discard(index)
        kind: McpItemEventType = (
            "response.mcp_list_tools.failed" if error else "response.mcp_list_tools.completed"
        )
        return [*self._progress(kind, index), self.state.item_done(index)]

    # --- calls ----------------------------------------------------------------------------------------

    def call_start(
        self, server_label: str, name: str, approval_request_id: str | None = None
    ) -> tuple[int, list[Event]]:
        new: McpCallItem = {
            "id": new_id("mcp"),
            "type": "mcp_call",
            "server_label": server_label,
            "name": name,
            "arguments": "",
            "output": None,
            "error": None,
            "status": "in_progress",
            "approval_request_id": approval_request_id,
        }
        index, events = self.text.start_item(new)
        return index, events + self._progress("response.mcp_call.in_progress", index)

    def call_delta(self, index: int, delta: str) -> list[Event]:
        self.state.mcp_call(index)["arguments"] += delta
        return [ev.mcp_arguments_delta(self.state.seq(), self.state.ref(index), delta)]

    def call_arguments_done(self, index: int, arguments: str) -> list[Event]:
        self.state.mcp_call(index)["arguments"] = arguments
        return [ev.mcp_arguments_done(self.state.seq(), self.state.ref(index), arguments)]

    def call_finished(self, index: int, output: str | None, error: dict[str, Any] | None) -> list[Event]:
        """The call ran: its `output`, or its `error` (then the call failed)."""
        item = self.state.mcp_call(index)
        item["output"], item["error"] = output, error
        item["status"] = "failed" if error is not None else "completed"
        kind: McpItemEventType = (
            "response.mcp_call.failed" if error is not None else "response.mcp_call.completed"
        )
        return [*self._progress(kind, index), self.state.item_done(index)]

    # --- approval requests ----------------------------------------------------------------------------

    def approval_start(self, server_label: str, name: str) -> tuple[int, list[Event]]:
        new: McpApprovalRequestItem = {
            "id": new_id("mcpr"),
            "type": "mcp_approval_request",
            "server_label": server_label,
            "name": name,
            "arguments": "",
        }
        index, events = self.text.start_item(new)
        self.state.open_statusless.add(index)
        return index, events

    def approval_done(self, index: int, arguments: str) -> list[Event]:
        item = self.state.output[index]
        assert item["type"] == "mcp_approval_request"
        item["arguments"] = arguments
        self.state.open_statusless.discard(index)
        return [self.state.item_done(index)]

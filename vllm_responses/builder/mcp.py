"""The event builder's remote-MCP steps: listing a server's tools, a call's arguments and result, approval requests."""

from __future__ import annotations

from typing import Any

from vllm_responses.builder.core import BuilderCore
from vllm_responses.protocol.events import (
    Event,
    McpArgumentsDelta,
    McpArgumentsDone,
    McpItemEvent,
    McpItemEventType,
)
from vllm_responses.protocol.ids import new_id
from vllm_responses.protocol.items import (
    McpApprovalRequestItem,
    McpCallItem,
    McpListedTool,
    McpListToolsItem,
)

__all__ = ["McpSteps"]


class McpSteps(BuilderCore):
    """`ResponseBuilder`'s MCP methods (see `stream.py`); each returns the events of its step."""

    def _mcp_event(self, type_: McpItemEventType, index: int) -> McpItemEvent:
        return {"type": type_, "sequence_number": self._next(), **self._ref(index)}

    # --- listing --------------------------------------------------------------------------------------

    def mcp_list_start(self, server_label: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: McpListToolsItem = {
            "id": new_id("mcpl"),
            "type": "mcp_list_tools",
            "server_label": server_label,
            "tools": [],
            "error": None,
        }
        index, added = self._add_item(new)
        self._custom_open.add(index)
        return index, [*events, added, self._mcp_event("response.mcp_list_tools.in_progress", index)]

    def mcp_list_done(self, index: int, tools: list[McpListedTool], error: str | None) -> list[Event]:
        item = self.output[index]
        assert item["type"] == "mcp_list_tools"
        item["tools"], item["error"] = tools, error
        self._custom_open.discard(index)
        kind: McpItemEventType = (
            "response.mcp_list_tools.failed" if error else "response.mcp_list_tools.completed"
        )
        return [self._mcp_event(kind, index), self._item_done(index)]

    # --- calls ----------------------------------------------------------------------------------------

    def mcp_call_item(self, index: int) -> McpCallItem:
        item = self.output[index]
        assert item["type"] == "mcp_call"
        return item

    def mcp_call_start(
        self, server_label: str, name: str, approval_request_id: str | None = None
    ) -> tuple[int, list[Event]]:
        events = self.close_open()
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
        index, added = self._add_item(new)
        return index, [*events, added, self._mcp_event("response.mcp_call.in_progress", index)]

    def mcp_call_delta(self, index: int, delta: str) -> list[Event]:
        self.mcp_call_item(index)["arguments"] += delta
        event: McpArgumentsDelta = {
            "type": "response.mcp_call_arguments.delta",
            "sequence_number": self._next(),
            "delta": delta,
            **self._ref(index),
        }
        return [event]

    def mcp_call_arguments_done(self, index: int, arguments: str) -> list[Event]:
        item = self.mcp_call_item(index)
        item["arguments"] = arguments
        done: McpArgumentsDone = {
            "type": "response.mcp_call_arguments.done",
            "sequence_number": self._next(),
            "arguments": arguments,
            **self._ref(index),
        }
        return [done]

    def mcp_call_finished(self, index: int, output: str | None, error: dict[str, Any] | None) -> list[Event]:
        """The call ran: its `output`, or its `error` (then the call failed)."""
        item = self.mcp_call_item(index)
        item["output"], item["error"] = output, error
        item["status"] = "failed" if error is not None else "completed"
        kind: McpItemEventType = (
            "response.mcp_call.failed" if error is not None else "response.mcp_call.completed"
        )
        return [self._mcp_event(kind, index), self._item_done(index)]

    # --- approval requests ----------------------------------------------------------------------------

    def mcp_approval_start(self, server_label: str, name: str) -> tuple[int, list[Event]]:
        events = self.close_open()
        new: McpApprovalRequestItem = {
            "id": new_id("mcpr"),
            "type": "mcp_approval_request",
            "server_label": server_label,
            "name": name,
            "arguments": "",
        }
        index, added = self._add_item(new)
        self._custom_open.add(index)
        return index, [*events, added]

    def mcp_approval_done(self, index: int, arguments: str) -> list[Event]:
        item = self.output[index]
        assert item["type"] == "mcp_approval_request"
        item["arguments"] = arguments
        self._custom_open.discard(index)
        return [self._item_done(index)]

"""`response.steer` over WebSocket mode: user input queued for a response running on the connection, committed in
the response that continues it (the SDK's beta `BetaResponseSteerEvent` and its accepted / pending / failed
events; docs/api.md "Steering").

A steer names a response generating on this connection. It is accepted at once and queued; when the response
completes, an automatic successor continues it with the queued input (its `response.created` is the commit
point). When the response instead stops for output only the client can give (function or custom tool output,
a coding tool's, a client-run tool search's, an MCP approval), `response.steer.pending` lists the stubs to fill,
and the queued input is prepended to the next `response.create` on that lane that continues it. A response
that ends otherwise (failed, cancelled, incomplete) fails its steers.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_responses.protocol.ids import new_id

__all__ = [
    "Steer",
    "SteerRefused",
    "Steering",
    "parse_steer",
    "refused_steer",
    "required_input",
    "steer_failed",
]

# The output item types only the client can answer, and the stub of the input that answers each.
_REQUIRED = {
    "function_call": lambda it: {
        "type": "function_call_output",
        "call_id": it["call_id"],
        "name": it["name"],
    },
    "custom_tool_call": lambda it: {"type": "custom_tool_call_output", "call_id": it["call_id"]},
    "shell_call": lambda it: {"type": "shell_call_output", "call_id": it["call_id"]},
    "apply_patch_call": lambda it: {"type": "apply_patch_call_output", "call_id": it["call_id"]},
    "mcp_approval_request": lambda it: {"type": "mcp_approval_response", "approval_request_id": it["id"]},
}


class SteerRefused(Exception):
    """A steer that cannot be queued: `code` is the SDK's `BetaResponseSteerErrorCode`."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Steer:
    """One accepted steer: its id, the response it steers, its input as user message items."""

    id: str
    previous_response_id: str
    items: tuple[dict[str, Any], ...]


def _message(item: Any, i: int) -> dict[str, Any]:
    """A steer input item: a user message of text only (`type`, `role`, `content` and nothing else)."""
    if not isinstance(item, dict) or set(item) - {"type", "role", "content"} or item.get("role") != "user":
        raise SteerRefused(
            f"input[{i}]: steering takes user messages only (type, role, content).", "invalid_input"
        )
    if item.get("type", "message") != "message":
        raise SteerRefused(f"input[{i}]: steering takes messages only.", "invalid_input")
    content = item.get("content")
    parts = [content] if isinstance(content, str) else content if isinstance(content, list) else None
    if not parts or not all(
        isinstance(p, str)
        or (isinstance(p, dict) and p.get("type") == "input_text" and isinstance(p.get("text"), str))
        for p in parts
    ):
        raise SteerRefused(f"input[{i}].content: text only (a string or input_text parts).", "invalid_input")
    return {"type": "message", "role": "user", "content": content}


def parse_steer(event: Mapping[str, Any]) -> tuple[str, tuple[dict[str, Any], ...]]:
    """A `response.steer` event's target and input items, or `SteerRefused` (`invalid_input`)."""
    if set(event) - {"type", "previous_response_id", "input"}:
        extra = sorted(set(event) - {"type", "previous_response_id", "input"})
        raise SteerRefused(
            f"response.steer takes only type, previous_response_id and input; got {extra}.", "invalid_input"
        )
    target, given = event.get("previous_response_id"), event.get("input")
    if not isinstance(target, str) or not target:
        raise SteerRefused("previous_response_id must name the response to steer.", "invalid_input")
    if isinstance(given, str) and given:
        return target, ({"type": "message", "role": "user", "content": given},)
    if not isinstance(given, list) or not given:
        raise SteerRefused(
            "input must be a non-empty string or a non-empty list of user messages.", "invalid_input"
        )
    return target, tuple(_message(item, i) for i, item in enumerate(given))


def steer_failed(seq: int, refused: SteerRefused, steer: Mapping[str, Any]) -> dict[str, Any]:
    """The `response.steer.failed` event: the error, and the `steer` it is about (`previous_response_id`,
    `input`, and the `id` of an accepted one)."""
    error = {"type": "invalid_request_error", "code": refused.code, "message": refused.message}
    return {"type": "response.steer.failed", "sequence_number": seq, "error": error, "steer": dict(steer)}


def refused_steer(event: Mapping[str, Any]) -> dict[str, Any]:
    """A refused steer as its failed event echoes it: the target and input as sent, or `""` for what the SDK's
    types cannot hold (a target that is not text; input that is neither text nor user messages)."""
    target, given = event.get("previous_response_id"), event.get("input")
    try:
        parse_steer({"type": "response.steer", "previous_response_id": "x", "input": given})
    except SteerRefused:
        given = ""
    return {"previous_response_id": target if isinstance(target, str) else "", "input": given}


def required_input(output: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stubs of the input only the client can give to continue a response with this `output`."""
    stubs = [_REQUIRED[str(it.get("type"))](it) for it in output if it.get("type") in _REQUIRED]
    stubs += [
        {"type": "tool_search_output", "call_id": it["call_id"], "execution": "client"}
        for it in output
        if it.get("type") == "tool_search_call" and it.get("execution") == "client"
    ]
    return stubs


@dataclass
class Steering:
    """A connection's steers: those queued on each running response, and those pending (waiting for the
    client's next create on the lane that continues their response)."""

    active: dict[str, str | None] = field(default_factory=dict)  # running response id -> its lane
    queued: dict[str, list[Steer]] = field(default_factory=dict)  # response id -> steers, in order
    pending: dict[str, list[Steer]] = field(default_factory=dict)  # response id -> steers awaiting a create
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def seq(self) -> int:
        """The `sequence_number` of the next steer event (steer events are numbered on their own)."""
        return next(self._seq)

    def accept(self, target: str, items: tuple[dict[str, Any], ...], unsteerable: str | None) -> Steer:
        """Queue a steer on the running response `target`, or `SteerRefused`. `unsteerable`: why that
        response cannot be steered (a conversation's, or one with automatic compaction), if it cannot."""
        if target not in self.active:
            raise SteerRefused(
                f"No response {target!r} is generating on this connection.", "response_not_active"
            )
        if unsteerable is not None:
            raise SteerRefused(unsteerable, "steering_not_supported")
        if len(self.queued.setdefault(target, [])) >= 16:
            raise SteerRefused("At most 16 steers may wait on one response.", "too_many_pending_steers")
        steer = Steer(new_id("steer"), target, items)
        self.queued[target].append(steer)
        return steer

    def take(self, response_id: str) -> list[Steer]:
        """The steers queued on a response that has ended (none left queued)."""
        self.active.pop(response_id, None)
        return self.queued.pop(response_id, [])

    def take_pending(self, previous_response_id: object) -> list[Steer]:
        """The pending steers an explicit create continuing `previous_response_id` commits."""
        return self.pending.pop(previous_response_id, []) if isinstance(previous_response_id, str) else []

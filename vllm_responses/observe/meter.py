"""One response's meter: when its first event and first output token went out, and, at its end, the
metrics (`metrics.py`) and the one log line per finished response (`logs.RESPONSE_LOGGER`)."""

from __future__ import annotations

import logging
import time

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.observe import metrics
from vllm_responses.observe.logs import RESPONSE_LOGGER, current_request_id, request_started_at
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.status import ResponseStatus

__all__ = ["ResponseMeter"]

_log = logging.getLogger(RESPONSE_LOGGER)


class ResponseMeter:
    """Fed every event of one response (`see`), then `finish`ed once. Times run from the HTTP request's
    arrival (`logs.request_started_at`), or from the meter's creation where there is none (WebSocket)."""

    def __init__(self) -> None:
        self.started = request_started_at() or time.monotonic()
        self.first_event_s: float | None = None
        self.first_token_s: float | None = None

    def see(self, event: Event) -> None:
        if self.first_token_s is not None:
            return
        now = time.monotonic() - self.started
        if self.first_event_s is None:
            self.first_event_s = now
            metrics.FIRST_EVENT.observe(now)
        if event["type"].endswith(".delta"):
            self.first_token_s = now
            metrics.FIRST_TOKEN.observe(now)

    def finish(self, builder: ResponseBuilder, *, turns: int, tool_calls: int) -> None:
        """Count the response by its final status and log its line."""
        total = time.monotonic() - self.started
        metrics.RESPONSES.labels(builder.status).inc()
        if turns:
            metrics.TURNS.observe(turns)
        # code calls are counted where they run (tools/code_interpreter.py); function and custom calls are handed to the client;
        # MCP calls by their item's status
        outcome = "returned" if builder.status == ResponseStatus.COMPLETED else builder.status
        for item in builder.output:
            if item["type"] == "function_call":
                metrics.TOOL_CALLS.labels("function", outcome).inc()
            elif item["type"] == "custom_tool_call":
                metrics.TOOL_CALLS.labels("custom", outcome).inc()
            elif item["type"] == "mcp_call":  # run by the server: counted by how the call ended
                metrics.TOOL_CALLS.labels("mcp", item["status"]).inc()
            elif item["type"] == "mcp_approval_request":
                metrics.TOOL_CALLS.labels("mcp", "approval_requested").inc()
        line = {
            "id": builder.id,
            "status": builder.status,
            "model": builder.base["model"],
            "input_tokens": builder.usage.input_tokens,
            "output_tokens": builder.usage.output_tokens,
            "tool_calls": tool_calls,
            "turns": turns,
            "duration_s": round(total, 4),
            "time_to_first_event_s": _rounded(self.first_event_s),
            "time_to_first_token_s": _rounded(self.first_token_s),
            "error_code": builder.error["code"] if builder.error else None,
            "request_id": current_request_id(),
        }
        _log.info(
            "response %s %s: %d input / %d output tokens, %d tool call(s), %d turn(s), %.3f s",
            builder.id,
            builder.status,
            line["input_tokens"],
            line["output_tokens"],
            tool_calls,
            turns,
            total,
            extra={"response": line},
        )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)

"""Hermes / Qwen tool calls: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`."""

from __future__ import annotations

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.json_regions import JsonCallsRegion
from vllm_responses.engine.parsers.scan import Region, ScanningParser

__all__ = ["HermesParser", "OPEN", "CLOSE"]

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@register("hermes", "qwen", "qwen2_5", "qwen3")
class HermesParser(ScanningParser):
    """Calls in `<tool_call>` tags; arguments stream as soon as the name is known."""

    name = "hermes"
    openers = (OPEN,)

    def open(self, marker: str) -> Region | None:
        return JsonCallsRegion(self, prefix=OPEN, end_markers=(CLOSE,))

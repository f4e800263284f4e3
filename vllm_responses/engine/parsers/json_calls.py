"""Bare JSON tool calls (Llama 3 JSON style): the output is a call object or a list of them."""

from __future__ import annotations

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.json_regions import JsonCallsRegion
from vllm_responses.engine.parsers.python_tag import TAG, python_tag_region
from vllm_responses.engine.parsers.scan import Region, ScanningParser

__all__ = ["JsonCallsParser"]


@register("llama3_json", "json", "llama4_json")
class JsonCallsParser(ScanningParser):
    """`{"name": ..., "arguments"|"parameters": {...}}` or a list, when the output starts with it."""

    name = "llama3_json"
    openers = (TAG,)
    start_chars = "{["
    repeat_start = True

    def start_region(self, first: str) -> Region | None:
        return JsonCallsRegion(self, own_end=True)

    def open(self, marker: str) -> Region | None:
        return python_tag_region(self)

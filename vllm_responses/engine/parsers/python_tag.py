"""Llama 3 `<|python_tag|>`: raw code for the code interpreter, or `<|python_tag|>{json}` calls."""

from __future__ import annotations

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.json_regions import JsonCallsRegion
from vllm_responses.engine.parsers.regions import CodeRegion, PeekRegion
from vllm_responses.engine.parsers.scan import Region, ScanningParser

__all__ = ["PythonTagParser", "python_tag_region", "TAG", "END_MARKERS"]

TAG = "<|python_tag|>"
END_MARKERS = ("<|eom_id|>", "<|eot_id|>")


def python_tag_region(parser: ScanningParser) -> Region:
    """The region after `<|python_tag|>`: JSON calls if it starts like `{"` or `[{`, else raw code."""

    def choose(held: str, final: bool) -> Region | None:
        s = "".join(held.split())[:2]
        if len(s) < 2 and not final:
            return None
        if s in ('{"', "{'", "[{"):
            return JsonCallsRegion(parser, prefix=TAG, end_markers=END_MARKERS)
        return CodeRegion(parser, END_MARKERS)

    return PeekRegion(parser, choose, END_MARKERS)


@register("llama3_python_tag", "python_tag")
class PythonTagParser(ScanningParser):
    """`<|python_tag|>code<|eom_id|>` is a code-interpreter call."""

    name = "llama3_python_tag"
    openers = (TAG,)

    def open(self, marker: str) -> Region | None:
        return python_tag_region(self)

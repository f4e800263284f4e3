"""The fallback layer: every tag format we know, plus bare JSON or pythonic calls at the start."""

from __future__ import annotations

from vllm_responses.engine.parsers import hermes, markdown
from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.function_tag import OPEN as FUNCTION_OPEN
from vllm_responses.engine.parsers.function_tag import FunctionTagRegion
from vllm_responses.engine.parsers.json_regions import JsonCallsRegion
from vllm_responses.engine.parsers.python_tag import TAG, python_tag_region
from vllm_responses.engine.parsers.pythonic import PythonicRegion
from vllm_responses.engine.parsers.regions import PeekRegion, TextRegion
from vllm_responses.engine.parsers.scan import Region, ScanningParser

__all__ = ["FallbackParser"]


@register("auto", "fallback")
class FallbackParser(ScanningParser):
    """Hermes tags, `<function=...>`, `<|python_tag|>`, python code blocks, and JSON / pythonic lists
    when the output starts with `{` / `[`. The default when nothing better is known."""

    name = "auto"
    openers = (hermes.OPEN, FUNCTION_OPEN, TAG, markdown.FENCE)
    start_chars = "{["
    repeat_start = True

    def open(self, marker: str) -> Region | None:
        if marker == hermes.OPEN:
            return JsonCallsRegion(self, prefix=marker, end_markers=(hermes.CLOSE,))
        if marker == FUNCTION_OPEN:
            return FunctionTagRegion(self)
        if marker == TAG:
            return python_tag_region(self)
        return markdown.MarkdownRegion(self)

    def start_region(self, first: str) -> Region | None:
        if first == "{":
            return JsonCallsRegion(self, own_end=True)

        def choose(held: str, final: bool) -> Region | None:
            s = held[1:].lstrip()
            if not s and not final:
                return None
            if s[:1] == "{":
                return JsonCallsRegion(self, own_end=True)
            if s[:1].isalpha() or s[:1] == "_":
                return PythonicRegion(self)
            return TextRegion(self, "")

        return PeekRegion(self, choose, ())

"""Llama 3.1 custom tool calls: `<function=name>{...}</function>`."""

from __future__ import annotations

import re

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.regions import ArgsRegion
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import Delta, TextDelta

__all__ = ["FunctionTagParser", "FunctionTagRegion"]

OPEN, CLOSE = "<function=", "</function>"
_NAME = re.compile(r"[\w.\-]{1,128}\Z")


class FunctionTagRegion(Region):
    """Reads `name>` after `<function=`, then the JSON arguments until `</function>`."""

    end_markers = (CLOSE,)

    def __init__(self, parser: ScanningParser) -> None:
        super().__init__(parser)
        self._head = ""
        self._args: ArgsRegion | None = None

    def feed(self, text: str) -> list[Delta]:
        if self._args is not None:
            return self._args.feed(text)
        self._head += text
        end = self._head.find(">")
        if end < 0:
            if len(self._head) <= 128 and _NAME.match(self._head or "x"):
                return []
            return self._not_a_call()
        name, body = self._head[:end], self._head[end + 1 :]
        if not _NAME.match(name):
            return self._not_a_call()
        self._args = ArgsRegion(self.parser, name, OPEN + name + ">", self.end_markers)
        return self._args.feed(body) if body else []

    def _not_a_call(self) -> list[Delta]:
        self.done, self.rest = True, self._head  # rescanned as text; the opener is not in it
        return [TextDelta(OPEN)]

    def close(self, marker: str | None) -> list[Delta]:
        if self._args is None:
            return [TextDelta(OPEN + self._head + (marker or ""))]
        return self._args.close(marker)


@register("function_tag", "llama3_function_tag")
class FunctionTagParser(ScanningParser):
    """Calls written as `<function=name>{json arguments}</function>`."""

    name = "function_tag"
    openers = (OPEN,)

    def open(self, marker: str) -> Region | None:
        return FunctionTagRegion(self)

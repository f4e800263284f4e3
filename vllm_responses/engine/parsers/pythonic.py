"""Pythonic tool calls: the output is a Python list of calls, `[f(a=1), g(b="x")]`."""

from __future__ import annotations

import ast
import json

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import Delta, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart

__all__ = ["PythonicParser", "PythonicRegion", "parse_pythonic"]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def parse_pythonic(text: str) -> list[tuple[str, str]] | None:
    """[(name, arguments JSON)] for a list of keyword-argument calls with literal values, else None."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    calls: list[tuple[str, str]] = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = _dotted(node.func)
        if name is None or any(k.arg is None for k in node.keywords):
            return None
        try:
            args = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
            calls.append((name, json.dumps(args, ensure_ascii=False)))
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None
    return calls or None


class PythonicRegion(Region):
    """Collects the list up to its matching `]` (quotes respected), then parses it with `ast`."""

    def __init__(self, parser: ScanningParser) -> None:
        super().__init__(parser)
        self._raw: list[str] = []
        self._depth = 0
        self._quote = ""
        self._esc = False

    def feed(self, text: str) -> list[Delta]:
        for i, c in enumerate(text):
            if self._quote:
                if self._esc:
                    self._esc = False
                elif c == "\\":
                    self._esc = True
                elif c == self._quote:
                    self._quote = ""
            elif c in "'\"":
                self._quote = c
            elif c in "([{":
                self._depth += 1
            elif c in ")]}":
                self._depth -= 1
                if self._depth <= 0:
                    self._raw.append(text[: i + 1])
                    return self._complete(text[i + 1 :])
        self._raw.append(text)
        return []

    def _complete(self, after: str) -> list[Delta]:
        raw = "".join(self._raw)
        calls = parse_pythonic(raw)
        self.done = True
        if calls is None:
            self.rest = raw + after
            return []
        self.rest = after
        return self._emit(calls)

    def _emit(self, calls: list[tuple[str, str]]) -> list[Delta]:
        out: list[Delta] = []
        for name, args in calls:
            i = self.parser.new_index()
            out += [ToolCallStart(i, name), ToolCallDelta(i, args), ToolCallEnd(i)]
        return out

    def close(self, marker: str | None) -> list[Delta]:
        raw = "".join(self._raw)
        calls = parse_pythonic(raw) or parse_pythonic(raw + "]")
        if calls is None:
            return [TextDelta(raw + (marker or ""))]
        return self._emit(calls)


@register("pythonic", "llama4_pythonic")
class PythonicParser(ScanningParser):
    """`[get_weather(city="Paris"), ...]` when the output starts with `[`."""

    name = "pythonic"
    start_chars = "["

    def start_region(self, first: str) -> Region | None:
        return PythonicRegion(self)

"""Reusable regions: raw code as a code-interpreter call, JSON arguments of a named call, peeking."""

from __future__ import annotations

import json
from collections.abc import Callable

from vllm_responses.engine.parsers.repair import JsonRepairer
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import (
    CODE_TOOL_NAME,
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = ["ArgsRegion", "CodeRegion", "PeekRegion", "StreamRegion", "TextRegion", "code_arguments", "escape"]


def escape(code: str) -> str:
    """`code` JSON-escaped, without the surrounding quotes."""
    return json.dumps(code, ensure_ascii=False)[1:-1]


def code_arguments(call_arguments: str) -> str | None:
    """The code of a code-interpreter call's arguments text, or None."""
    try:
        args = json.loads(call_arguments)
    except ValueError:
        return None
    code = args.get("code") if isinstance(args, dict) else None
    return code if isinstance(code, str) else None


class CodeRegion(Region):
    """Raw code streamed as a code-interpreter call `{"code": "..."}` (outer blank space trimmed)."""

    def __init__(self, parser: ScanningParser, end_markers: tuple[str, ...] = ()) -> None:
        super().__init__(parser)
        self.end_markers = end_markers
        self.index = parser.new_index()
        self._seen = False
        self._ws = ""

    def begin(self) -> list[Delta]:
        return [ToolCallStart(self.index, CODE_TOOL_NAME), ToolCallDelta(self.index, '{"code": "')]

    def feed(self, text: str) -> list[Delta]:
        if not self._seen:
            text = text.lstrip()
            self._seen = bool(text)
        body = text.rstrip()
        if not body:
            self._ws += text
            return []
        out, self._ws = self._ws + body, text[len(body) :]
        return [ToolCallDelta(self.index, escape(out))]

    def close(self, marker: str | None) -> list[Delta]:
        return [ToolCallDelta(self.index, '"}'), ToolCallEnd(self.index)]


class ArgsRegion(Region):
    """The JSON arguments object of a call whose name is already known; hopeless JSON stays text."""

    def __init__(self, parser: ScanningParser, name: str, prefix: str, end_markers: tuple[str, ...]) -> None:
        super().__init__(parser)
        self.name, self.prefix, self.end_markers = name, prefix, end_markers
        self.index = -1
        self._json = JsonRepairer()
        self._raw: list[str] = []

    def feed(self, text: str) -> list[Delta]:
        if self.index < 0:
            self._raw.append(text)
        new = self._json.feed(text)
        if self.index < 0 and self._json.started:
            self.index = self.parser.new_index()
            return [ToolCallStart(self.index, self.name), ToolCallDelta(self.index, new)]
        return [ToolCallDelta(self.index, new)] if self.index >= 0 and new else []

    def close(self, marker: str | None) -> list[Delta]:
        if self.index >= 0:
            return [ToolCallDelta(self.index, self._json.close()), ToolCallEnd(self.index)]
        raw = "".join(self._raw)
        if raw.strip():
            return [TextDelta(self.prefix + raw + (marker or ""))]
        i = self.parser.new_index()
        return [ToolCallStart(i, self.name), ToolCallDelta(i, "{}"), ToolCallEnd(i)]


class StreamRegion(Region):
    """Passes its content through as text or reasoning."""

    def __init__(self, parser: ScanningParser, end_markers: tuple[str, ...], reasoning: bool = False) -> None:
        super().__init__(parser)
        self.end_markers = end_markers
        self.kind: type[TextDelta] | type[ReasoningDelta] = ReasoningDelta if reasoning else TextDelta

    def feed(self, text: str) -> list[Delta]:
        return [self.kind(text)]

    def close(self, marker: str | None) -> list[Delta]:
        return []


class TextRegion(Region):
    """Gives everything back to the parser as text at once (a region that turned out not to be one)."""

    def __init__(self, parser: ScanningParser, text: str) -> None:
        super().__init__(parser)
        self.done, self.rest = True, text

    def feed(self, text: str) -> list[Delta]:
        self.rest += text
        return []

    def close(self, marker: str | None) -> list[Delta]:
        return [TextDelta(self.rest + (marker or ""))]


Chooser = Callable[[str, bool], "Region | None"]


class PeekRegion(Region):
    """Holds text until `choose(held, final)` picks the real region (None: wait for more)."""

    def __init__(self, parser: ScanningParser, choose: Chooser, end_markers: tuple[str, ...]) -> None:
        super().__init__(parser)
        self.end_markers = end_markers
        self._choose = choose
        self._held = ""
        self._inner: Region | None = None

    def _sync(self) -> None:
        assert self._inner is not None
        self.end_markers = self._inner.end_markers
        self.done, self.rest = self._inner.done, self._inner.rest

    def _pick(self, final: bool) -> list[Delta]:
        inner = self._choose(self._held, final)
        if inner is None:
            return []
        self._inner, held, self._held = inner, self._held, ""
        if isinstance(inner, TextRegion):
            inner.rest += held  # never contains the opener, so rescanning it terminates
            out: list[Delta] = []
        else:
            out = inner.begin() + (inner.feed(held) if held else [])
        self._sync()
        return out

    def feed(self, text: str) -> list[Delta]:
        if self._inner is None:
            self._held += text
            return self._pick(final=False)
        out = self._inner.feed(text)
        self._sync()
        return out

    def close(self, marker: str | None) -> list[Delta]:
        out = self._pick(final=True) if self._inner is None else []
        if self._inner is None:
            return [TextDelta(self._held + (marker or ""))]
        if self._inner.done:
            return out + [TextDelta(self._inner.rest + (marker or ""))]
        return out + self._inner.close(marker)

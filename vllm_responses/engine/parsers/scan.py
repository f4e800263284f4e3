"""A marker-scanning parser base: text until an opener, then a `Region` decodes the call until its end."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from vllm_responses.engine.parsers.base import ToolParser
from vllm_responses.engine.types import Delta, ReasoningDelta, TextDelta, ToolCallDelta, ToolSpec

__all__ = ["Region", "ScanningParser", "find_first", "merge_deltas", "partial_suffix"]


def partial_suffix(buf: str, markers: Sequence[str]) -> int:
    """Length of the longest suffix of `buf` that is a proper prefix of one of `markers`."""
    best = 0
    for m in markers:
        for k in range(min(len(m) - 1, len(buf)), best, -1):
            if buf.endswith(m[:k]):
                best = k
                break
    return best


def find_first(buf: str, markers: Sequence[str]) -> tuple[int, str | None]:
    """Earliest occurrence of any marker (the longest one on a tie), or (-1, None)."""
    best, found = -1, None
    for m in markers:
        i = buf.find(m)
        if i >= 0 and (found is None or i < best or (i == best and len(m) > len(found))):
            best, found = i, m
    return best, found


def merge_deltas(deltas: list[Delta]) -> list[Delta]:
    """Join adjacent text / reasoning / same-call argument deltas and drop empty ones."""
    out: list[Delta] = []
    for d in deltas:
        if isinstance(d, (TextDelta, ReasoningDelta)) and not d.text:
            continue
        if isinstance(d, ToolCallDelta) and not d.arguments:
            continue
        prev = out[-1] if out else None
        if isinstance(d, TextDelta) and isinstance(prev, TextDelta):
            out[-1] = TextDelta(prev.text + d.text, prev.logprobs + d.logprobs)
        elif isinstance(d, ReasoningDelta) and isinstance(prev, ReasoningDelta):
            out[-1] = ReasoningDelta(prev.text + d.text)
        elif isinstance(d, ToolCallDelta) and isinstance(prev, ToolCallDelta) and prev.index == d.index:
            out[-1] = ToolCallDelta(d.index, prev.arguments + d.arguments)
        else:
            out.append(d)
    return out


class Region(ABC):
    """Decodes the output after an opener until one of `end_markers` (or the end of the output).

    A region that finds its own end sets `done` and puts the text it did not consume in `rest`; that
    text goes back to the parser's text scanning.
    """

    end_markers: tuple[str, ...] = ()

    def __init__(self, parser: ScanningParser) -> None:
        self.parser = parser
        self.done = False
        self.rest = ""

    def begin(self) -> list[Delta]:
        return []

    @abstractmethod
    def feed(self, text: str) -> list[Delta]: ...

    @abstractmethod
    def close(self, marker: str | None) -> list[Delta]:
        """The end marker was found (None: the output ended). Not called once `done`."""


class ScanningParser(ToolParser):
    """Text until one of `openers`; `open` returns the region for it; `start_chars` open at the start."""

    openers: ClassVar[tuple[str, ...]] = ()
    start_chars: ClassVar[str] = ""
    repeat_start: ClassVar[bool] = False  # after a start region ends, look for another one

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self._buf = ""
        self._region: Region | None = None
        self._at_start = True
        self._calls = 0
        self._calls_at_enter = 0

    def new_index(self) -> int:
        self._calls += 1
        return self._calls - 1

    def open(self, marker: str) -> Region | None:
        return None

    def open_start(self, buf: str, final: bool) -> tuple[Region | None, int] | None:
        """At the start of the output: (region or None, chars it consumed), or None to wait for more."""
        s = buf.lstrip()
        if not s:
            return (None, 0) if final else None
        if s[0] in self.start_chars:
            return self.start_region(s[0]), len(buf) - len(s)
        return None, 0

    def start_region(self, first: str) -> Region | None:
        return None

    def feed(self, text: str) -> list[Delta]:
        self._buf += text
        out: list[Delta] = []
        self._run(out, final=False)
        return merge_deltas(out)

    def finish(self) -> list[Delta]:
        out: list[Delta] = []
        self._run(out, final=True)
        if self._region is not None:
            out += self._region.close(None)
            self._region = None
        if self._buf:
            out.append(TextDelta(self._buf))
            self._buf = ""
        return merge_deltas(out)

    def _enter(self, region: Region, out: list[Delta]) -> None:
        self._region = region
        self._calls_at_enter = self._calls
        out += region.begin()

    def _run(self, out: list[Delta], final: bool) -> None:
        while True:
            region = self._region
            if region is None:
                if self._at_start:
                    got = self.open_start(self._buf, final)
                    if got is None:
                        return
                    self._at_start = False
                    if got[0] is not None:
                        self._buf = self._buf[got[1] :]
                        self._enter(got[0], out)
                        continue
                i, m = find_first(self._buf, self.openers)
                if m is None:
                    keep = 0 if final else partial_suffix(self._buf, self.openers)
                    cut = len(self._buf) - keep
                    out.append(TextDelta(self._buf[:cut]))
                    self._buf = self._buf[cut:]
                    return
                out.append(TextDelta(self._buf[:i]))
                self._buf = self._buf[i + len(m) :]
                new = self.open(m)
                if new is None:
                    out.append(TextDelta(m))
                else:
                    self._enter(new, out)
                continue
            i, m = find_first(self._buf, region.end_markers)
            if m is None:
                keep = 0 if final else partial_suffix(self._buf, region.end_markers)
                cut = len(self._buf) - keep
                body, after = self._buf[:cut], self._buf[cut:]
            else:
                body, after = self._buf[:i], self._buf[i + len(m) :]
            out += region.feed(body) if body else []
            if region.done:
                self._buf = region.rest + (m or "") + after
                self._region = None
                # look for another start region only after one that made calls (else: an endless loop)
                self._at_start = self.repeat_start and self._calls > self._calls_at_enter
                continue
            self._buf = after
            if m is None:
                return
            out += region.close(m)
            self._region = None

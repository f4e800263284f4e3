"""Mistral tool calls: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (before v11) and
`[TOOL_CALLS]name[ARGS]{...}` / `[TOOL_CALLS]name{...}` (v11 on), one marker per call."""

from __future__ import annotations

import re

from vllm_responses.engine.parsers.base import register
from vllm_responses.engine.parsers.json_regions import JsonCallsRegion
from vllm_responses.engine.parsers.regions import PeekRegion, TextRegion
from vllm_responses.engine.parsers.repair import JsonRepairer
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import Delta, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart

__all__ = ["ARGS", "ListRegion", "MistralParser", "NamedCallRegion", "TOOL_CALLS"]

TOOL_CALLS, ARGS = "[TOOL_CALLS]", "[ARGS]"
_NAME = re.compile(r"[\w.\-]{1,128}")


class NamedCallRegion(Region):
    """`name[ARGS]{...}` or `name{...}` after `[TOOL_CALLS]`: the call opens once its name is known and its
    arguments stream until the JSON object closes; what follows goes back to text (the next call's marker)."""

    def __init__(self, parser: ScanningParser) -> None:
        super().__init__(parser)
        self._head = ""
        self._json: JsonRepairer | None = None
        self._index = -1

    def feed(self, text: str) -> list[Delta]:
        if self._json is None:
            self._head += text
            return self._read_name()
        return self._args(text)

    def _read_name(self) -> list[Delta]:
        m = _NAME.match(self._head)
        name = m.group(0) if m else ""
        after = self._head[len(name) :]
        if after.startswith(ARGS):
            body = after[len(ARGS) :]
        elif after.startswith("{"):
            body = after
        elif not after or (name and ARGS.startswith(after)):
            return []  # the name or the `[ARGS]` marker may go on
        else:
            return self._not_a_call()
        if not name:
            return self._not_a_call()
        self._json = JsonRepairer()
        self._index = self.parser.new_index()
        return [ToolCallStart(self._index, name), *self._args(body)]

    def _not_a_call(self) -> list[Delta]:
        self.done, self.rest = True, self._head  # rescanned as text; the marker is not in it
        return [TextDelta(TOOL_CALLS)]

    def _args(self, text: str) -> list[Delta]:
        assert self._json is not None
        new = self._json.feed(text)
        out: list[Delta] = [ToolCallDelta(self._index, new)] if new else []
        if self._json.done:
            self.done, self.rest = True, self._json.rest
            out.append(ToolCallEnd(self._index))
        elif not self._json.ok:  # hopeless JSON: the call ends with what could be repaired
            self.done, self.rest = True, ""
            out += [ToolCallDelta(self._index, self._json.close()), ToolCallEnd(self._index)]
        return out

    def close(self, marker: str | None) -> list[Delta]:
        if self._json is None:
            m = _NAME.fullmatch(self._head.removesuffix(ARGS))
            if m is None:
                return [TextDelta(TOOL_CALLS + self._head + (marker or ""))]
            i = self.parser.new_index()
            return [ToolCallStart(i, m.group(0)), ToolCallDelta(i, "{}"), ToolCallEnd(i)]
        if not self._json.started:
            return [ToolCallDelta(self._index, "{}"), ToolCallEnd(self._index)]
        return [ToolCallDelta(self._index, self._json.close()), ToolCallEnd(self._index)]


class ListRegion(JsonCallsRegion):
    """The pre-v11 JSON list (or object) of calls; not a call: the marker and the text stay text."""

    def __init__(self, parser: ScanningParser) -> None:
        super().__init__(parser, prefix=TOOL_CALLS, own_end=True)

    def feed(self, text: str) -> list[Delta]:
        out = super().feed(text)
        if self.done and self._calls == 0:  # given back: the marker first, then `rest` is rescanned
            return [*out, TextDelta(TOOL_CALLS)]
        return out


def _after_marker(parser: ScanningParser) -> Region:
    """A JSON list / object after the marker is the pre-v11 form; a name is the v11 one."""

    def choose(held: str, final: bool) -> Region | None:
        s = held.lstrip()
        if not s:
            return TextRegion(parser, TOOL_CALLS) if final else None
        if s[0] in "[{":
            return ListRegion(parser)
        return NamedCallRegion(parser)

    return PeekRegion(parser, choose, ())


@register("mistral")
class MistralParser(ScanningParser):
    """Calls after `[TOOL_CALLS]`, as a JSON list or as `name[ARGS]{...}`; arguments stream."""

    name = "mistral"
    openers = (TOOL_CALLS,)

    def open(self, marker: str) -> Region | None:
        return _after_marker(self)

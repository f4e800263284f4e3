"""JSON call objects (`{"name": ..., "arguments": {...}}`, or a list of them) decoded as they stream."""

from __future__ import annotations

import json

from vllm_responses.engine.parsers.repair import JsonRepairer, repair_json
from vllm_responses.engine.parsers.scan import Region, ScanningParser
from vllm_responses.engine.types import Delta, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart

__all__ = ["CallObject", "JsonCallsRegion"]

_ARG_KEYS = ("arguments", "parameters")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})


class CallObject:
    """One call object: emits the call as soon as its name is known, then its arguments as they come.

    `is_call` turns False as soon as the object cannot be a call (then nothing was emitted).
    """

    def __init__(self, parser: ScanningParser) -> None:
        self.parser = parser
        self.json = JsonRepairer()
        self.index = -1
        self.is_call = True
        self._name: str | None = None
        self._sent = 0

    def _args_key(self) -> str | None:
        return next((k for k in _ARG_KEYS if k in self.json.values), None)

    def feed(self, text: str) -> list[Delta]:
        self.json.feed(text)  # a repairer that gave up keeps its state as of then: chunking-independent
        if self.index >= 0:
            return self._stream()
        if not self.is_call:
            return []
        values, done = self.json.values, self.json.completed
        if any(k not in _CALL_KEYS for k in done):
            self.is_call = False
            return []
        if self._name is None and "name" in done:
            name = json.loads(values["name"])
            if not isinstance(name, str):
                self.is_call = False
                return []
            self._name = name
        key = self._args_key()
        if self._name is not None and key and values[key].startswith("{"):
            self.index = self.parser.new_index()
            return [ToolCallStart(self.index, self._name), *self._stream()]
        if not self.json.ok:
            self.is_call = False
        return []

    def _stream(self) -> list[Delta]:
        key = self._args_key()
        new = self.json.values[key][self._sent :] if key else ""
        self._sent += len(new)
        return [ToolCallDelta(self.index, new)] if new else []

    def close(self) -> list[Delta]:
        """Finish the object; [] with `is_call` False when it was not a call after all."""
        self.json.close()
        if self.index >= 0:
            return [*self._stream(), ToolCallEnd(self.index)]
        if not self.is_call or not self.json.ok or not self.json.started:
            self.is_call = False
            return []
        values = self.json.values
        name = json.loads(values["name"]) if "name" in values else None
        key = self._args_key()
        args = "{}" if key is None else _as_object(values[key])
        if not isinstance(name, str) or args is None:
            self.is_call = False
            return []
        i = self.parser.new_index()
        return [ToolCallStart(i, name), ToolCallDelta(i, args), ToolCallEnd(i)]


def _as_object(text: str) -> str | None:
    """Arguments given as an object, or as a string holding (almost-)JSON object text."""
    value = json.loads(text)
    if isinstance(value, dict):
        return text
    if isinstance(value, str):
        return repair_json(value) if value.strip() else "{}"
    return None


class JsonCallsRegion(Region):
    """A call object or a list of them. Not a call: the raw text is text (given back if `own_end`).

    With `own_end` (bare JSON at the start of the output) the region ends after the object or list;
    otherwise it runs to its end marker and ignores what follows the JSON.
    """

    def __init__(
        self,
        parser: ScanningParser,
        prefix: str = "",
        end_markers: tuple[str, ...] = (),
        own_end: bool = False,
    ) -> None:
        super().__init__(parser)
        self.prefix, self.end_markers, self.own_end = prefix, end_markers, own_end
        self._raw: list[str] = []
        self._obj: CallObject | None = None
        self._state = "start"  # start | obj | list | after | text
        self._list = False
        self._calls = 0

    def feed(self, text: str) -> list[Delta]:
        if self._calls == 0:
            self._raw.append(text)
        out: list[Delta] = []
        i = 0
        while i < len(text) and not self.done:
            st = self._state
            if st == "obj":
                assert self._obj is not None
                out += self._obj.feed(text[i:])
                i = len(text)
                if not self._obj.is_call:
                    return out + self._not_a_call()
                if self._obj.json.done:
                    text, i = self._obj.json.rest, 0
                    out += self._end_object()
                continue
            c = text[i]
            if st == "text":
                return out  # kept in `_raw`, given back at the end marker
            if st == "after" and self.own_end and not c.isspace():
                self._give_back(text[i:])
                return out
            if c.isspace() or (st == "list" and c == ","):
                i += 1
            elif st == "start" and c == "[":
                self._list, self._state = True, "list"
                i += 1
            elif c == "{" and st != "after":
                self._obj, self._state = CallObject(self.parser), "obj"
            elif st == "list" and c == "]":
                self._state = "after"
                i += 1
            elif st == "after":
                return out  # what follows the calls inside the markers is dropped
            else:
                return out + self._not_a_call()
        return out

    def _end_object(self) -> list[Delta]:
        assert self._obj is not None
        out = self._obj.close()
        if not self._obj.is_call:
            self._obj = None
            return self._not_a_call()
        self._obj = None
        self._calls += 1
        self._state = "list" if self._list else "after"
        return out

    def _not_a_call(self) -> list[Delta]:
        self._obj = None
        if self._calls:
            self._state = "after"
            return []
        self._state = "text"
        if self.own_end:
            self._give_back("")
        return []

    def _give_back(self, tail: str) -> None:
        if self._calls == 0:
            self.rest = "".join(self._raw)
        else:
            self.rest = tail
        self.done = True

    def close(self, marker: str | None) -> list[Delta]:
        out: list[Delta] = []
        if self._obj is not None:
            out = self._obj.close()
            if self._obj.is_call:
                self._calls += 1
        if self._calls == 0:
            return [TextDelta(self.prefix + "".join(self._raw) + (marker or ""))]
        return out

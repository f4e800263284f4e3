"""`JsonStringField`: one string field's value of a JSON object, decoded while the object streams in."""

from __future__ import annotations

import json

from vllm_responses.engine.parsers.json_text import ESCAPES, HEX_DIGITS, WHITESPACE

__all__ = ["JsonStringField"]


class JsonStringField:
    """Decode the value of one top-level string field (default "code") of a JSON object fed in fragments.

    `feed` returns the newly decoded characters (never half an escape); `value` holds everything so
    far and `done` turns true at the closing quote. If the object has no such string field, nothing
    is emitted.
    """

    def __init__(self, field: str = "code") -> None:
        self.field = field
        self.value = ""
        self.done = False
        self._mode = "start"  # start | scan | value | end
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._is_key = False
        self._expect_key = False
        self._key: list[str] = []
        self._pending = 0  # 1: matched key, want ':'; 2: want the value's opening quote
        self._vesc = ""  # partial escape inside the value
        self._hi = ""  # a high surrogate waiting for its low half

    def feed(self, fragment: str) -> str:
        out: list[str] = []
        i, n = 0, len(fragment)
        while i < n:
            if self._mode == "value":
                i = self._value(fragment, i, out)
            elif self._mode == "end":
                break
            else:
                self._scan(fragment[i])
                i += 1
        s = "".join(out)
        self.value += s
        return s

    def finish(self) -> str:
        s, self._hi = self._hi, ""
        self.value += s
        return s

    def _scan(self, c: str) -> None:
        if self._mode == "start":
            if c == "{":
                self._mode, self._depth, self._expect_key = "scan", 1, True
            elif c not in WHITESPACE:
                self._mode = "end"
            return
        if self._in_str:
            if self._esc:
                self._esc = False
            elif c == "\\":
                self._esc = True
            elif c == '"':
                self._in_str = False
                if self._is_key:
                    self._is_key = False
                    try:
                        key = json.loads('"' + "".join(self._key) + '"')
                    except ValueError:
                        key = None
                    self._pending = 1 if key == self.field else 0
                return
            if self._is_key:
                self._key.append(c)
            return
        if c in WHITESPACE:
            return
        if self._pending == 1:
            self._pending = 2 if c == ":" else 0
            if self._pending:
                return
        elif self._pending == 2:
            self._pending = 0
            if c == '"':
                self._mode = "value"
                return
        if c == '"':
            self._in_str, self._is_key, self._key = True, self._depth == 1 and self._expect_key, []
            self._expect_key = False
        elif c in "{[":
            self._depth += 1
        elif c in "}]":
            self._depth -= 1
            if self._depth <= 0:
                self._mode = "end"
        elif c == "," and self._depth == 1:
            self._expect_key = True

    def _value(self, s: str, i: int, out: list[str]) -> int:
        if not self._vesc:
            j = i
            while j < len(s) and s[j] not in '\\"':
                j += 1
            if j > i:
                self._put(s[i:j], out)
            if j == len(s):
                return j
            if s[j] == '"':
                self._put("", out)
                if self._hi:
                    out.append(self._hi)
                    self._hi = ""
                self._mode, self.done = "end", True
                return j + 1
            self._vesc = "\\"
            return j + 1
        self._vesc += s[i]
        e = self._vesc
        if e[1] != "u":
            self._vesc = ""
            self._put(ESCAPES.get(e[1], e[1]), out)
        elif len(e) > 2 and e[-1] not in HEX_DIGITS:
            self._vesc = ""  # malformed \u escape: keep it literally
            self._put(e, out)
        elif len(e) == 6:
            self._vesc = ""
            cp = int(e[2:], 16)
            if 0xDC00 <= cp <= 0xDFFF and self._hi:
                full = 0x10000 + ((ord(self._hi) - 0xD800) << 10) + (cp - 0xDC00)
                self._hi = ""
                out.append(chr(full))
            elif 0xD800 <= cp <= 0xDBFF:
                self._put("", out)
                self._hi = chr(cp)
            else:
                self._put(chr(cp), out)
        return i + 1

    def _put(self, text: str, out: list[str]) -> None:
        if self._hi:
            out.append(self._hi)
            self._hi = ""
        if text:
            out.append(text)

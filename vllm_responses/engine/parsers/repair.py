"""An incremental almost-JSON to JSON transducer (`JsonRepairer`) and `repair_json` built on it."""

from __future__ import annotations

import json
import re

from vllm_responses.engine.parsers.json_text import CONTROL_ESCAPES, ESCAPES, HEX_DIGITS, WHITESPACE

__all__ = ["JsonRepairer", "repair_json"]

_WORD = re.compile(r"[A-Za-z0-9_+\-.]")
_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?\Z")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
_LITERALS = {
    "true": "true",
    "True": "true",
    "false": "false",
    "False": "false",
    "null": "null",
    "None": "null",
}


class JsonRepairer:
    """Incremental almost-JSON to JSON transducer: `feed` returns repaired text that is final.

    Fixes single quotes, raw control characters and bad escapes in strings, Python literals, bare keys,
    trailing and missing commas; `close` returns what completes the text (closing strings, brackets).
    Values of top-level object fields are also collected in `values` (key -> repaired text so far),
    with `completed` naming the finished ones. `ok` turns false when the input is hopeless; the
    repairer then ignores further input. Text after the top-level value is kept in `rest`.
    """

    def __init__(self, allow_array: bool = False) -> None:
        self.allow_array = allow_array
        self.ok = True
        self.started = False
        self.rest = ""
        self.values: dict[str, str] = {}
        self.completed: set[str] = set()
        self._out: list[str] = []
        self._mode = "start"  # start | main | str | word | done | dead
        self._stack: list[list[str]] = []  # [kind 'o'|'a', expect 'key'|'colon'|'value'|'comma']
        self._comma = False
        self._field: str | None = None
        self._key: str | None = None
        self._keybuf: list[str] = []
        self._q = '"'
        self._is_key = False
        self._esc = ""
        self._word = ""

    @property
    def done(self) -> bool:
        return self._mode == "done"

    @property
    def text(self) -> str:
        return "".join(self._out)

    def feed(self, s: str) -> str:
        mark = len(self._out)
        i, n = 0, len(s)
        while i < n:
            m = self._mode
            if m == "str":
                i = self._string(s, i)
            elif m == "done":
                self.rest += s[i:]
                break
            elif m == "dead":
                break
            elif m == "word" and _WORD.match(s[i]):
                self._word += s[i]
                i += 1
            else:
                if m == "word" and not self._end_word():
                    break
                if self._char(s[i]):
                    i += 1
        return "".join(self._out[mark:])

    def close(self) -> str:
        mark = len(self._out)
        if self._mode == "str":
            self._esc = ""
            self._end_string()
        elif self._mode == "word":
            self._end_word()
        if self._stack and self._mode in ("main", "dead"):
            self._comma = False
            kind, expect = self._stack[-1]
            if expect == "colon":
                self._emit(":")
                expect = "value"
            if expect == "value" and kind == "o":
                self._emit("null")
                self._value_done()
            while self._stack:
                self._close_container()
        return "".join(self._out[mark:])

    # -- internals -----------------------------------------------------------------------------------

    def _emit(self, s: str) -> None:
        self._out.append(s)
        if self._field is not None:
            self.values[self._field] += s
        elif self._is_key and self._mode == "str" and len(self._stack) == 1:
            self._keybuf.append(s)

    def _dead(self) -> bool:
        self._mode, self.ok = "dead", False
        return False

    def _begin_value(self) -> None:
        if self._comma:
            self._comma = False
            self._emit(",")
        if len(self._stack) == 1 and self._stack[0][0] == "o":
            self._field = self._key or ""
            self.values[self._field] = ""

    def _value_done(self) -> None:
        if self._stack:
            self._stack[-1][1] = "comma"
        if len(self._stack) == 1 and self._field is not None:
            self.completed.add(self._field)
            self._field = None

    def _close_container(self) -> None:
        kind = self._stack[-1][0]
        self._emit("}" if kind == "o" else "]")
        self._stack.pop()
        if self._stack:
            self._value_done()
        else:
            self._mode = "done"

    def _char(self, c: str) -> bool:
        """Handle one character outside strings and words; False to reprocess it (or when dead)."""
        if c in WHITESPACE:
            return True
        if self._mode == "start":
            return self._open_top(c)
        frame = self._stack[-1]
        kind, expect = frame
        if expect == "comma":
            if c in "}]":
                self._close_container()
                return True
            if c == "," or c in "\"'{[" or _WORD.match(c):
                self._comma = True  # the comma, or a missing one: then `c` starts the next key or value
                frame[1] = "key" if kind == "o" else "value"
                return c == ","
            return self._dead()
        if expect == "colon":
            if c in ":=":
                self._emit(":")
                frame[1] = "value"
                return True
            return self._dead()
        if c in "}]":
            self._comma = False
            if kind == "o" and expect == "value":
                self._emit("null")
                self._value_done()
            self._close_container()
            return True
        if expect == "key":
            if c in "\"'" or _IDENT.match(c):
                if self._comma:
                    self._comma = False
                    self._emit(",")
                self._is_key, self._keybuf = True, []
                if c in "\"'":
                    self._q, self._mode = c, "str"
                    self._emit('"')
                else:
                    self._mode, self._word = "word", c
                return True
            return self._dead()
        if c in "\"'":
            self._begin_value()
            self._q, self._mode, self._is_key = c, "str", False
            self._emit('"')
        elif c in "{[":
            self._begin_value()
            self._emit(c)
            self._stack.append(["o", "key"] if c == "{" else ["a", "value"])
        elif _WORD.match(c):
            self._mode, self._word, self._is_key = "word", c, False
        else:
            return self._dead()
        return True

    def _open_top(self, c: str) -> bool:
        """The top-level value's opening bracket (`[` only when `allow_array`); anything else is hopeless."""
        if c == "{" or (c == "[" and self.allow_array):
            self.started, self._mode = True, "main"
            self._emit(c)
            self._stack.append(["o", "key"] if c == "{" else ["a", "value"])
            return True
        return self._dead()

    def _end_word(self) -> bool:
        w, self._word = self._word, ""
        self._mode = "main"
        if self._is_key:
            if not _IDENT.match(w):
                return self._dead()
            self._mode = "str"
            self._emit(json.dumps(w)[:-1])
            self._end_string()
            return True
        if w in _LITERALS:
            w = _LITERALS[w]
        elif not _NUMBER.match(w):
            try:
                w = json.dumps(float(w)) if any(ch in w for ch in ".eE") else str(int(w))
            except ValueError:
                return self._dead()
            if w in ("NaN", "Infinity", "-Infinity"):
                w = "null"
        self._begin_value()
        self._emit(w)
        self._value_done()
        return True

    def _end_string(self) -> None:
        self._emit('"')
        self._mode = "main"
        if self._is_key:
            if len(self._stack) == 1:
                try:
                    self._key = json.loads("".join(self._keybuf))
                except ValueError:
                    self._key = "".join(self._keybuf)
            self._is_key = False
            self._stack[-1][1] = "colon"
        else:
            self._value_done()

    def _string(self, s: str, i: int) -> int:
        if self._esc:
            return self._escape(s, i)
        q = self._q
        j = i
        while j < len(s) and s[j] not in "\\\"'" and s[j] >= " ":
            j += 1
        if j > i:
            self._emit(s[i:j])
        if j == len(s):
            return j
        c = s[j]
        if c == q:
            self._end_string()
        elif c == "\\":
            self._esc = "\\"
        elif c == '"':
            self._emit('\\"')
        elif c == "'":
            self._emit("'")
        else:
            self._emit(CONTROL_ESCAPES.get(c) or "\\u%04x" % ord(c))
        return j + 1

    def _escape(self, s: str, i: int) -> int:
        c = s[i]
        e = self._esc + c
        if len(e) == 2 and c != "u":
            self._esc = ""
            if c in ESCAPES:
                self._emit(e)
            elif c == "'":
                self._emit("'")
            else:
                self._emit("\\\\")
                return i  # reprocess the character as ordinary string content
            return i + 1
        if len(e) > 2 and c not in HEX_DIGITS:
            self._esc = ""
            self._emit("\\\\u" + e[2:-1])
            return i
        self._esc = e
        if len(e) == 6:
            self._esc = ""
            self._emit(e)
        return i + 1


_FENCE = re.compile(r"\A```[\w+-]*[ \t]*\n?(.*?)(\n?```\s*)?\Z", re.S)


def repair_json(text: str, allow_array: bool = False) -> str | None:
    """Best-effort repair of almost-JSON object text (array too if `allow_array`); None if hopeless."""
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    r = JsonRepairer(allow_array)
    r.feed(s)
    if not r.ok or not r.started:
        return None
    out = r.text + r.close()
    try:
        json.loads(out)
    except ValueError:
        return None
    return out

"""JSON string syntax for the incremental JSON readers of `parsers/`: the escape table, hex digits, spaces."""

from __future__ import annotations

__all__ = ["CONTROL_ESCAPES", "ESCAPES", "HEX_DIGITS", "WHITESPACE"]

# the letter after a backslash -> the character it stands for (`\u` escapes aside)
ESCAPES: dict[str, str] = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
# a raw control character that has a short escape -> that escape (`"\n"` -> `"\\n"`)
CONTROL_ESCAPES: dict[str, str] = {char: "\\" + letter for letter, char in ESCAPES.items() if char < " "}
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
WHITESPACE = " \t\r\n"

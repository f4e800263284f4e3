"""`JsonStringListField`: the strings of one array field of a JSON object, decoded while the object streams in."""

from __future__ import annotations

from vllm_responses.engine.parsers.json_text import WHITESPACE
from vllm_responses.engine.parsers.partial_json import JsonStringField

__all__ = ["JsonStringListField"]


class JsonStringListField(JsonStringField):
    """Decode the strings of one top-level field (an array of strings, or one string) fed in fragments.

    `feed` returns the steps decoded so far, each `(i, text, closed)`: new characters of the i-th string
    (never half an escape), and whether that string has just closed. `values` holds every string so far. An
    element that is not a string ends the decoding (the caller reads the whole arguments at the end).
    """

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.values: list[str] = []
        self._item: JsonStringField | None = None  # the string being decoded
        self._single = False  # the field holds one string, not an array

    @property
    def closed(self) -> int:
        """How many of the strings have closed."""
        return len(self.values) - (self._item is not None)

    def feed(self, fragment: str) -> list[tuple[int, str, bool]]:  # type: ignore[override]
        steps: list[tuple[int, str, bool]] = []
        for c in fragment:
            if self._mode == "end":
                break
            if self._item is not None:
                self._item_char(c, steps)
            elif self._mode == "list":
                self._list_char(c)
            else:
                self._scan(c)
        return steps

    def _scan(self, c: str) -> None:
        if self._pending == 2 and c in '["':
            self._pending = 0
            self._mode = "list"
            if c == '"':
                self._single = True
                self._open_item()
            return
        super()._scan(c)

    def _list_char(self, c: str) -> None:
        if c == '"':
            self._open_item()
        elif c not in WHITESPACE and c != ",":
            self._mode = "end"  # the array's end, or an element that is not a string

    def _open_item(self) -> None:
        self._item = JsonStringField("v")
        self._item.feed('{"v":"')
        self.values.append("")

    def _item_char(self, c: str, steps: list[tuple[int, str, bool]]) -> None:
        assert self._item is not None
        text = self._item.feed(c)
        self.values[-1] += text
        closed, i = self._item.done, len(self.values) - 1
        if steps and steps[-1][0] == i:  # one step per string and fragment
            text = steps.pop()[1] + text
        if text or closed:
            steps.append((i, text, closed))
        if closed:
            self._item = None
            if self._single:
                self._mode = "end"

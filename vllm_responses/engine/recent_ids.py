"""The token ids of the last few prompts tokenized, by their text: a response's prechecks and its first call
tokenize the same prompt."""

from __future__ import annotations

import array
import collections
import threading
from collections.abc import Callable

__all__ = ["RecentIds"]


class RecentIds:
    """`ids(text)`: `encode(text)`, kept for the last `kept` texts (a new list each time; the same text always
    tokenizes the same, so a kept one is exact). A code turn's two prechecks and its call render the same
    prompt, which is then tokenized once instead of three times. Safe across threads (long prompts are
    tokenized in a worker thread)."""

    def __init__(self, encode: Callable[[str], list[int]], kept: int = 8) -> None:
        self._encode = encode
        self._kept = kept
        self._ids: collections.OrderedDict[str, array.array[int]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def ids(self, text: str) -> list[int]:
        with self._lock:
            found = self._ids.get(text)
            if found is not None:
                self._ids.move_to_end(text)
                return found.tolist()
        ids = self._encode(text)
        with self._lock:
            self._ids[text] = array.array("q", ids)  # 8 bytes a token, not a Python int each
            while len(self._ids) > self._kept:
                self._ids.popitem(last=False)
        return ids  # the caller's own: what is kept is a copy

"""`WordTokenizer`: the chunking tokenizer where the embedding model's own is not at hand (a remote model): each
run of word characters, and each other non-space character, is one token."""

from __future__ import annotations

import re

__all__ = ["WordTokenizer"]

_TOKEN = re.compile(r"\w+|[^\w\s]")


class WordTokenizer:
    """Words and punctuation as tokens (`Tokenizer`)."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _TOKEN.finditer(text)]

"""A search query as an FTS5 keyword query: its words, each quoted (nothing of FTS5's query syntax reaches the
engine), any of them matching (`OR`), ranked by FTS5's BM25."""

from __future__ import annotations

import re

__all__ = ["MAX_TERMS", "fts_query"]

MAX_TERMS = 64  # distinct words of one query searched; the rest are dropped
_WORD = re.compile(r"\w+")


def fts_query(query: str) -> str | None:
    """The FTS5 query matching chunks holding any word of `query`; None for a query without words."""
    terms: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        terms.setdefault(word, None)
        if len(terms) == MAX_TERMS:
            break
    return " OR ".join(f'"{term}"' for term in terms) or None

"""A search query as a keyword query: its words, each quoted (nothing of the engine's query syntax reaches it), any
of them matching: for SQLite's FTS5 (ranked by BM25) and for Postgres's full text search (`to_tsquery`)."""

from __future__ import annotations

import re

__all__ = ["MAX_TERMS", "fts_query", "tsquery"]

MAX_TERMS = 64  # distinct words of one query searched; the rest are dropped
_WORD = re.compile(r"\w+")


def _terms(query: str) -> list[str]:
    terms: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        terms.setdefault(word, None)
        if len(terms) == MAX_TERMS:
            break
    return list(terms)


def fts_query(query: str) -> str | None:
    """The FTS5 query matching chunks holding any word of `query`; None for a query without words."""
    return " OR ".join(f'"{term}"' for term in _terms(query)) or None


def tsquery(query: str) -> str | None:
    """The text of a `to_tsquery` matching chunks holding any word of `query` (each a quoted lexeme, which the
    text search configuration stems, or drops as a stop word); None for a query without words."""
    return " | ".join(f"'{term}'" for term in _terms(query)) or None

"""A file's text cut into overlapping chunks of at most N tokens (`chunking_strategy`): `ChunkingStrategy` read
and checked as OpenAI's, `chunk_text` cutting at the best break (paragraph, line, sentence, word) near the end
of each window.

Each chunk is an exact slice of the text: chunk i is `text[start:end]`, the first starts at 0, the last ends at
the end of the text, and each starts before or where the previous one ends, so no character is lost and none is
repeated beyond the overlap (whole tokens, at most `chunk_overlap_tokens`, from a word break where one is near).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.retrieval.tokens import Tokenizer

__all__ = [
    "AUTO",
    "MAX_CHUNK_TOKENS",
    "MIN_CHUNK_TOKENS",
    "Chunk",
    "ChunkingStrategy",
    "chunk_text",
    "parse_chunking_strategy",
]

MIN_CHUNK_TOKENS = 100
MAX_CHUNK_TOKENS = 4096


@dataclass(frozen=True)
class ChunkingStrategy:
    """Chunks of at most `max_chunk_size_tokens` tokens, each sharing `chunk_overlap_tokens` with the next."""

    max_chunk_size_tokens: int = 800
    chunk_overlap_tokens: int = 400
    auto: bool = False

    def wire(self) -> dict[str, Any]:
        """The strategy as a vector store file reports it (`static`, with its sizes; `auto` is reported so)."""
        sizes = {
            "max_chunk_size_tokens": self.max_chunk_size_tokens,
            "chunk_overlap_tokens": self.chunk_overlap_tokens,
        }
        return {"type": "static", "static": sizes}


AUTO = ChunkingStrategy(800, 400, auto=True)


@dataclass(frozen=True)
class Chunk:
    """One chunk: its place among the file's chunks, its text (`text[start:end]` of the file) and its tokens."""

    index: int
    text: str
    start: int
    end: int
    tokens: int


def parse_chunking_strategy(value: object, param: str = "chunking_strategy") -> ChunkingStrategy:
    """`chunking_strategy` as the SDK types it (absent or `{"type": "auto"}`, or `{"type": "static", "static":
    {...}}`), checked: a 400 naming the field at fault."""
    if value is None:
        return AUTO
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    kind = value.get("type")
    if kind == "auto":
        return AUTO
    if kind != "static":
        raise InvalidRequest(
            f"Invalid value for '{param}.type': {kind!r}. Supported values are: 'auto' and 'static'.",
            param=f"{param}.type",
        )
    static = value.get("static")
    if not isinstance(static, Mapping):
        raise InvalidRequest(
            f"Missing required parameter: '{param}.static'.",
            param=f"{param}.static",
            code="missing_required_parameter",
        )
    size = _integer(static, "max_chunk_size_tokens", f"{param}.static", MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS)
    overlap = _integer(static, "chunk_overlap_tokens", f"{param}.static", 0, None)
    if overlap > size // 2:
        raise InvalidRequest(
            f"Invalid '{param}.static.chunk_overlap_tokens': the overlap ({overlap}) must not exceed half of "
            f"'max_chunk_size_tokens' ({size}).",
            param=f"{param}.static.chunk_overlap_tokens",
        )
    return ChunkingStrategy(size, overlap)


def _integer(fields: Mapping[str, Any], name: str, parent: str, low: int, high: int | None) -> int:
    param = f"{parent}.{name}"
    if name not in fields:
        raise InvalidRequest(
            f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter"
        )
    value = fields[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an integer.", param=param, code="invalid_type"
        )
    if value < low:
        raise InvalidRequest(
            f"Invalid '{param}': integer below minimum value. Expected a value >= {low}, but got {value} instead.",
            param=param,
            code="integer_below_min_value",
        )
    if high is not None and value > high:
        raise InvalidRequest(
            f"Invalid '{param}': integer above maximum value. Expected a value <= {high}, but got {value} instead.",
            param=param,
            code="integer_above_max_value",
        )
    return value


# How good a break between two tokens is, by the whitespace after the earlier one (and what ends it).
_PARAGRAPH = re.compile(r"\n[^\S\n]*\n")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]]*$")
_WHITESPACE = re.compile(r"\s*")


def _break_strength(text: str, spans: list[tuple[int, int]], at: int) -> int:
    """How good a place to cut between token `at - 1` and token `at` is: 4 a paragraph break, 3 the end of a
    sentence, 2 a line break, 1 a word break, 0 inside a word; -1 where the two share a character."""
    before_end, after_start = spans[at - 1][1], spans[at][0]
    if after_start < before_end:
        return -1
    gap = _WHITESPACE.match(text, before_end)
    space = gap.group() if gap else ""
    if not space:
        return 0
    if _PARAGRAPH.search(space):
        return 4
    if _SENTENCE_END.search(text, max(0, before_end - 4), before_end):
        return 3
    return 2 if "\n" in space else 1


def _cut(text: str, spans: list[tuple[int, int]], start: int, size: int) -> int:
    """The token the chunk that begins at token `start` ends before: the best break in the second half of its
    window (the latest of the best), else its full size."""
    limit = start + size
    if limit >= len(spans):
        return len(spans)
    best, best_at = -1, limit
    for at in range(limit, start + max(1, size // 2) - 1, -1):
        strength = _break_strength(text, spans, at)
        if strength > best:
            best, best_at = strength, at
            if strength == 4:
                break
    return best_at if best >= 0 else limit


def chunk_text(text: str, tokenizer: Tokenizer, strategy: ChunkingStrategy = AUTO) -> list[Chunk]:
    """`text` in chunks of at most `strategy.max_chunk_size_tokens` tokens, each beginning
    `chunk_overlap_tokens` tokens (or fewer) before the previous one's end; no chunks for a text of no tokens."""
    spans = tokenizer.token_spans(text)
    if not spans:
        return []
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = _cut(text, spans, start, strategy.max_chunk_size_tokens)
        first = 0 if start == 0 else spans[start][0]
        last = len(text) if end == len(spans) else spans[end][0]
        chunks.append(Chunk(len(chunks), text[first:last], first, last, end - start))
        if end == len(spans):
            return chunks
        start = _next_start(text, spans, start, end, strategy.chunk_overlap_tokens)


def _next_start(text: str, spans: list[tuple[int, int]], start: int, end: int, overlap: int) -> int:
    """The next chunk's first token: `overlap` tokens before `end`, moved later to the first word break within
    16 tokens or at `end` (a chunk does not begin inside a word), else to the first token that shares no
    character with the one before it; always after `start`."""
    first = max(start + 1, end - overlap)
    for at in range(first, min(end, first + 16) + 1):  # `end` too: no overlap rather than half a word
        if _break_strength(text, spans, at) > 0:
            return at
    at = first
    while at < end and spans[at][0] < spans[at - 1][1]:
        at += 1
    return at

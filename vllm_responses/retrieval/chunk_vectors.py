"""Chunks' vectors from an embedding model whose input bound may be smaller than a chunk: a longer chunk is cut into
windows of at most the bound (in the chunking tokenizer's tokens) and embedded as the mean of its windows' vectors,
scaled to length 1; every call to the model holds at most `BATCH` texts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vllm_responses.engine.embedder import Embedder
from vllm_responses.retrieval.tokens import Tokenizer
from vllm_responses.retrieval.vectors import Matrix, unit_rows

__all__ = ["BATCH", "SPECIAL_TOKENS", "embed_chunks", "windows"]

BATCH = 64  # texts per call to the embedding model
SPECIAL_TOKENS = 2  # the model adds its own ([CLS] and [SEP] for BERT) to each input


def windows(text: str, tokenizer: Tokenizer, size: int | None) -> list[str]:
    """`text` as consecutive slices of at most `size` tokens each on its own (None: no bound), together the whole
    text. A slice that begins or ends inside a word may be more tokens on its own than it was in the text (a
    WordPiece continuation read as a word's start): such a slice is cut again."""
    if size is None:
        return [text]
    spans = tokenizer.token_spans(text)
    if len(spans) <= size:
        return [text]
    out = []
    for first in range(0, len(spans), size):
        start = 0 if first == 0 else spans[first][0]
        last = first + size
        end = len(text) if last >= len(spans) else spans[last][0]
        piece = text[start:end]
        out += windows(piece, tokenizer, size) if len(piece) < len(text) else [piece]
    return out


async def embed_chunks(embedder: Embedder, tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[Matrix, int]:
    """One unit vector per text (the mean of its windows' vectors, scaled), and the tokens the model read."""
    bound = embedder.max_input_tokens
    size = None if bound is None else max(1, bound - SPECIAL_TOKENS)
    owner: list[int] = []
    pieces: list[str] = []
    for i, text in enumerate(texts):
        for piece in windows(text, tokenizer, size):
            owner.append(i)
            pieces.append(piece)
    vectors: list[list[float]] = []
    tokens = 0
    for at in range(0, len(pieces), BATCH):
        done = await embedder.embed(pieces[at : at + BATCH])
        vectors += done.vectors
        tokens += done.tokens
    if not texts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32), tokens
    rows = unit_rows(vectors)
    sums = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
    np.add.at(sums, np.asarray(owner), rows)
    return unit_rows(sums), tokens

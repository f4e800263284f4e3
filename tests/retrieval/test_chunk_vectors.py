"""Chunks' vectors: a chunk longer than the embedding model's input is embedded as the mean of its windows (each at
most the bound less the model's special tokens, together the whole chunk), every call holding at most 64 texts."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.fake_embedder import FakeEmbedder, fake_vector
from vllm_responses.retrieval.chunk_vectors import BATCH, SPECIAL_TOKENS, embed_chunks, windows
from vllm_responses.retrieval.word_tokens import WordTokenizer


def test_windows_are_bounded_slices_of_the_whole_text() -> None:
    text = "one two, three four five. six seven eight nine ten"
    tokenizer = WordTokenizer()
    for size in (1, 2, 3, 5, 100):
        parts = windows(text, tokenizer, size)
        assert "".join(parts) == text
        assert all(len(tokenizer.token_spans(p)) <= size for p in parts)
    assert windows(text, tokenizer, None) == [text]


def test_windows_stay_bounded_when_read_on_their_own() -> None:
    """A window that begins inside a word ("...tine" of "coroutine") is more WordPiece tokens on its own than in
    its chunk; each window is within the bound as the model reads it, on the embedded model's tokenizer."""
    from pydoc_data.topics import topics

    from vllm_responses.engine.models import default_embedding_model_path
    from vllm_responses.retrieval.chunking import chunk_text
    from vllm_responses.retrieval.tokens import HFTokenizer

    folder = default_embedding_model_path()
    if folder is None:
        pytest.skip("the embedded embedding model is not set up")
    tokenizer = HFTokenizer.from_file(folder)
    size = 256 - SPECIAL_TOKENS
    for label in ("async", "function", "identifiers"):  # Python's help() texts that have such windows
        for chunk in chunk_text(topics[label], tokenizer):
            parts = windows(chunk.text, tokenizer, size)
            assert "".join(parts) == chunk.text
            assert max(len(tokenizer.token_spans(p)) for p in parts) <= size, label


class Characters:
    """One token a character, as the fake embedder counts them."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [(i, i + 1) for i in range(len(text))]


async def test_a_long_chunk_is_the_mean_of_its_windows() -> None:
    embedder = FakeEmbedder(max_input_tokens=4 + SPECIAL_TOKENS)
    short, long = "abc", "abcdefghi"
    vectors, tokens = await embed_chunks(embedder, Characters(), [short, long])
    parts = ["abcd", "efgh", "i"]
    assert embedder.calls == [[short, *parts]]
    mean = np.mean([fake_vector(p) for p in parts], axis=0)
    assert vectors[0] == pytest.approx(np.asarray(fake_vector(short)), abs=1e-6)
    assert vectors[1] == pytest.approx(mean / np.linalg.norm(mean), abs=1e-6)
    assert tokens == len(short) + sum(len(p) for p in parts)


async def test_calls_hold_at_most_a_batch() -> None:
    embedder = FakeEmbedder(max_input_tokens=1000)
    texts = [f"text {i}" for i in range(2 * BATCH + 1)]
    vectors, _ = await embed_chunks(embedder, WordTokenizer(), texts)
    assert [len(c) for c in embedder.calls] == [BATCH, BATCH, 1] and vectors.shape == (len(texts), 8)
    empty, _ = await embed_chunks(embedder, WordTokenizer(), [])
    assert empty.shape == (0, 8)

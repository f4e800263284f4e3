"""Chunking: `chunking_strategy` checked as OpenAI's, and chunks that are exact, bounded, overlapping slices cut at
the best break, on real Hugging Face tokenizers (the tiny model's, and a WordPiece one that drops spaces)."""

from __future__ import annotations

import random
import re

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.pre_tokenizers import BertPreTokenizer

from tests.support.real import tiny_model_path_or_fail
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.retrieval.chunking import (
    AUTO,
    Chunk,
    ChunkingStrategy,
    chunk_text,
    parse_chunking_strategy,
)
from vllm_responses.retrieval.tokens import HFTokenizer

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()
)


def wordpiece() -> HFTokenizer:
    """A WordPiece tokenizer (as BERT-like embedding models have): words and punctuation, spaces left out."""
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate([*WORDS, ".", ",", "!", "?", "é"])}}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = BertPreTokenizer()
    return HFTokenizer(tok)


def prose(seed: int, paragraphs: int = 12) -> str:
    rnd = random.Random(seed)
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(rnd.randint(2, 8)):
            words = [rnd.choice(WORDS) for _ in range(rnd.randint(4, 30))]
            sentences.append(" ".join(words).capitalize() + rnd.choice([".", "!", "?"]))
        out.append(("  " if rnd.random() < 0.2 else " ").join(sentences))
    return rnd.choice(["", "\n"]) + "\n\n".join(out) + rnd.choice(["", "\n", "  "])


def check_exact(text: str, chunks: list[Chunk], tokenizer: HFTokenizer, strategy: ChunkingStrategy) -> None:
    """Every chunk is its slice, within the size; together they cover the text, each overlapping the previous
    by at most the overlap; nothing else repeats."""
    spans = tokenizer.token_spans(text)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert sum(c.tokens for c in chunks) - len(spans) <= strategy.chunk_overlap_tokens * (len(chunks) - 1)
    for i, chunk in enumerate(chunks):
        assert chunk.index == i and chunk.text == text[chunk.start : chunk.end]
        assert 0 < chunk.tokens <= strategy.max_chunk_size_tokens
        if i:
            prev = chunks[i - 1]
            assert prev.start < chunk.start <= prev.end  # moves on, loses nothing
            shared = [s for s in spans if chunk.start <= s[0] and s[1] <= prev.end]
            assert len(shared) <= strategy.chunk_overlap_tokens
    rebuilt = chunks[0].text + "".join(text[chunks[i - 1].end : c.end] for i, c in enumerate(chunks) if i)
    assert rebuilt == text


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("sizes", [(100, 0), (100, 50), (137, 20), (800, 400)])
def test_chunks_are_exact_slices_on_wordpiece(seed: int, sizes: tuple[int, int]) -> None:
    tok = wordpiece()
    strategy = ChunkingStrategy(*sizes)
    text = prose(seed, paragraphs=30 if sizes[0] == 800 else 12)
    chunks = chunk_text(text, tok, strategy)
    assert len(chunks) > 1
    check_exact(text, chunks, tok, strategy)


@pytest.mark.parametrize("seed", range(3))
def test_chunks_are_exact_on_the_tiny_models_tokenizer_with_multibyte_characters(seed: int) -> None:
    """Its tokens split a multi-byte character over several tokens sharing one span: no chunk starts or ends
    inside one."""
    tok = HFTokenizer.from_file(tiny_model_path_or_fail())
    text = prose(seed, 4).replace("a", "日本").replace("e", "é")
    strategy = ChunkingStrategy(100, 50)
    chunks = chunk_text(text, tok, strategy)
    assert len(chunks) > 3
    check_exact(text, chunks, tok, strategy)
    # a chunk holds whole characters: its text tokenizes to exactly the tokens it was counted as
    assert [len(tok.token_spans(c.text)) for c in chunks] == [c.tokens for c in chunks]
    # and begins at a word break (every window here has one near its start)
    assert all(text[c.start - 1].isspace() or text[c.start].isspace() for c in chunks[1:])


def test_overlaps_begin_at_a_word_break_on_wordpiece() -> None:
    """WordPiece splits an unknown word into pieces: the next chunk's overlap does not begin inside one."""
    vocab = {"[UNK]": 0, "al": 1, "##pha": 2, "be": 3, "##ta": 4, ".": 5}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = BertPreTokenizer()
    hf = HFTokenizer(tok)
    text = " ".join(["alpha", "beta"] * 200)
    for overlap in (1, 2, 3, 25, 50):
        strategy = ChunkingStrategy(100, overlap)
        chunks = chunk_text(text, hf, strategy)
        check_exact(text, chunks, hf, strategy)
        assert all(text[c.start - 1] == " " for c in chunks[1:]), overlap


def test_breaks_prefer_paragraphs_then_sentences_then_words() -> None:
    tok = wordpiece()
    strategy = ChunkingStrategy(100, 0)
    para = " ".join(["alpha"] * 60) + ".\n\n" + " ".join(["beta"] * 60) + "."
    first = chunk_text(para, tok, strategy)[0]
    assert first.text.rstrip().endswith("alpha.")  # the paragraph break, not the 100th token
    sentences = " ".join(["alpha"] * 55) + ". " + " ".join(["beta"] * 30) + ", " + " ".join(["gamma"] * 40)
    assert (
        chunk_text(sentences, tok, strategy)[0].text.rstrip().endswith("alpha.")
    )  # a sentence beats a comma's word
    words = " ".join(["alpha"] * 250)
    chunks = chunk_text(words, tok, strategy)
    assert [c.tokens for c in chunks] == [100, 100, 50]  # no better break: full windows
    assert all(not re.search(r"alph$|^lpha", c.text.strip()) for c in chunks)


def test_a_break_in_the_first_half_of_the_window_is_not_taken() -> None:
    """A chunk is at least half its size: a paragraph break early in the window loses to a later word break."""
    tok = wordpiece()
    text = " ".join(["alpha"] * 10) + "\n\n" + " ".join(["beta"] * 200)
    first = chunk_text(text, tok, ChunkingStrategy(100, 0))[0]
    assert first.tokens >= 50 and "beta" in first.text


def test_auto_is_800_and_400_and_short_or_empty_texts() -> None:
    tok = wordpiece()
    assert (AUTO.max_chunk_size_tokens, AUTO.chunk_overlap_tokens) == (800, 400)
    text = " ".join(["alpha"] * 2000)
    chunks = chunk_text(text, tok)
    assert [c.start // 6 for c in chunks] == [0, 400, 800, 1200] and [c.tokens for c in chunks] == [800] * 4
    assert chunk_text("alpha beta.", tok) == [Chunk(0, "alpha beta.", 0, 11, 3)]
    assert chunk_text("", tok) == [] and chunk_text("   \n", tok) == []


def test_parse_chunking_strategy() -> None:
    assert parse_chunking_strategy(None) is AUTO and parse_chunking_strategy({"type": "auto"}) is AUTO
    static = {"type": "static", "static": {"max_chunk_size_tokens": 300, "chunk_overlap_tokens": 150}}
    assert parse_chunking_strategy(static) == ChunkingStrategy(300, 150)
    assert ChunkingStrategy(300, 150).wire() == static
    assert AUTO.wire() == {
        "type": "static",
        "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400},
    }


@pytest.mark.parametrize(
    ("value", "param", "code"),
    [
        ("auto", "chunking_strategy", "invalid_type"),
        ({"type": "fixed"}, "chunking_strategy.type", "invalid_value"),
        ({"type": "static"}, "chunking_strategy.static", "missing_required_parameter"),
        (
            {"type": "static", "static": {"chunk_overlap_tokens": 0}},
            "chunking_strategy.static.max_chunk_size_tokens",
            "missing_required_parameter",
        ),
        (
            {"type": "static", "static": {"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0}},
            "chunking_strategy.static.max_chunk_size_tokens",
            "integer_below_min_value",
        ),
        (
            {"type": "static", "static": {"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0}},
            "chunking_strategy.static.max_chunk_size_tokens",
            "integer_above_max_value",
        ),
        (
            {"type": "static", "static": {"max_chunk_size_tokens": 100.0, "chunk_overlap_tokens": 0}},
            "chunking_strategy.static.max_chunk_size_tokens",
            "invalid_type",
        ),
        (
            {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": -1}},
            "chunking_strategy.static.chunk_overlap_tokens",
            "integer_below_min_value",
        ),
        (
            {"type": "static", "static": {"max_chunk_size_tokens": 101, "chunk_overlap_tokens": 51}},
            "chunking_strategy.static.chunk_overlap_tokens",
            "invalid_value",
        ),
    ],
)
def test_bad_strategies_name_the_param(value: object, param: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_chunking_strategy(value)
    assert (err.value.param, err.value.code, err.value.status) == (param, code, 400)
    assert f"'{param}'" in err.value.message or f"'{param}" in err.value.message

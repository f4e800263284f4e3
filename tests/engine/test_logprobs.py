"""`engine/logprobs.py` alone: token spans in a chunk's text, and tokens handed to the visible deltas."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_responses.engine.logprobs import FLOOR, TokenAligner, token_spans
from vllm_responses.engine.types import Delta, ReasoningDelta, TextDelta, ToolCallDelta


@dataclass
class Lp:
    """vLLM's `Logprob`: the fields the aligner reads."""

    logprob: float
    rank: int | None
    decoded_token: str | None


def position(sampled: tuple[int, str, float, int], *others: tuple[int, str, float, int]) -> dict[int, Lp]:
    return {tid: Lp(lp, rank, tok) for tid, tok, lp, rank in (sampled, *others)}


def test_spans_tile_the_text_where_the_pieces_spell_it_or_not() -> None:
    assert token_spans("Hello world", ["Hello", " world"]) == [(0, 5), (5, 11)]
    # parts of one multi-byte character decode to U+FFFD each: the last of them gets the character
    assert token_spans("aé b", ["a", "\ufffd", "\ufffd", " b"]) == [(0, 1), (1, 1), (1, 2), (2, 4)]
    # a stop string the text leaves out: an empty span at the end
    assert token_spans("Hi", ["Hi", "STOP"]) == [(0, 2), (2, 2)]
    # text held back by the detokenizer: nothing now
    assert token_spans("", ["\ufffd"]) == [(0, 0)]


def aligned(aligner: TokenAligner, deltas: list[Delta]) -> list[tuple[str, list[str]]]:
    return [
        (d.text, [t.token for t in d.logprobs]) for d in aligner.attach(deltas) if isinstance(d, TextDelta)
    ]


def test_markup_and_reasoning_tokens_are_skipped_and_each_token_shown_once() -> None:
    aligner = TokenAligner(top=2)
    aligner.chunk(
        "<think>hm</think>Hi",
        [1, 2, 3, 4, 5],
        [position((i, t, -0.5, 1)) for i, t in enumerate(["<think>", "hm", "</think>", "H", "i"], start=1)],
    )
    deltas: list[Delta] = [ReasoningDelta("hm"), TextDelta("Hi")]
    assert aligned(aligner, deltas) == [("Hi", ["H", "i"])]
    aligner.chunk(" there<tool_call>{}", [6, 7, 8], [position((6, " there", -1.0, 1)), {}, {}])
    more: list[Delta] = [TextDelta(" there"), ToolCallDelta(0, "{}")]
    assert aligned(aligner, more) == [(" there", [" there"])]


def test_buffered_text_gets_the_tokens_of_earlier_chunks_and_a_changed_delta_none() -> None:
    aligner = TokenAligner(top=0)
    aligner.prefill("```python\n")  # written by the engine: no tokens
    aligner.chunk("<", [1], [position((1, "<", -0.1, 1))])
    assert aligned(aligner, []) == []  # a parser holding "<" back (it may open a tag)
    aligner.chunk("b>", [2], [position((2, "b>", -0.2, 1))])
    assert aligned(aligner, [TextDelta("<b>")]) == [("<b>", ["<", "b>"])]
    aligner.chunk("  x", [3], [position((3, "  x", -0.3, 1))])
    assert aligned(aligner, [TextDelta("X")]) == [("X", [])]  # not in the output verbatim


def test_top_alternatives_by_rank_and_non_finite_values_floored() -> None:
    aligner = TokenAligner(top=2)
    pos = position((5, "b", -2.0, 3), (7, "a", -0.1, 1), (9, "c", float("-inf"), 2))
    aligner.chunk("b", [5], [pos])
    (delta,) = aligner.attach([TextDelta("b")])
    assert isinstance(delta, TextDelta)
    (token,) = delta.logprobs
    assert token.token == "b" and token.logprob == -2.0
    assert token.top == (("a", -0.1), ("c", FLOOR))


def test_text_is_not_looked_for_inside_reasoning_or_arguments_before_it() -> None:
    aligner = TokenAligner(top=0)
    pieces = ["<think>", "ok", "</think>", "<tool_call>", '{"a": "ok"}', "</tool_call>", "ok"]
    aligner.chunk(
        "".join(pieces), list(range(7)), [position((i, t, -1.0 - i, 1)) for i, t in enumerate(pieces)]
    )
    deltas: list[Delta] = [ReasoningDelta("ok"), ToolCallDelta(0, '{"a": "ok"}'), TextDelta("ok")]
    (text,) = [d for d in aligner.attach(deltas) if isinstance(d, TextDelta)]
    assert [(t.token, t.logprob) for t in text.logprobs] == [
        ("ok", -7.0)
    ]  # the last token, not an earlier "ok"

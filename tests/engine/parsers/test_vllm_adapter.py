"""vLLM's own tool-call and reasoning parsers through `VllmParserAdapter`, on hand-written transcripts of each
family, fed one token at a time and in random splits (real vLLM parser code, a tokenizer built here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from tests.engine.parsers.helpers import summarize
from tests.engine.parsers.vllm_transcripts import (
    CASES,
    CODE,
    TOOLS,
    Case,
    random_splits,
    token_chunks,
    tokenizer,
)
from vllm_responses.engine.parsers import get_parser
from vllm_responses.engine.parsers.partial_json import JsonStringField
from vllm_responses.engine.parsers.reasoning import ReasoningSplitter
from vllm_responses.engine.types import (
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from vllm_responses.engine.vllm_parser import VllmParserAdapter, vllm_parser_factory


def _adapter(case: Case, inner: Any = None) -> VllmParserAdapter:
    tok = tokenizer(case.specials, case.words)
    parser = vllm_parser_factory(case.tool, case.reasoning, tok, inner)(TOOLS)
    assert isinstance(parser, VllmParserAdapter)
    return parser


def _drive(parser: VllmParserAdapter, chunks: Sequence[tuple[str, list[int]]]) -> list[Delta]:
    out: list[Delta] = []
    for text, ids in chunks:
        out += parser.feed_tokens(text, ids)
    return out + parser.finish()


def _check(case: Case, deltas: list[Delta]) -> None:
    got = summarize(deltas)  # also checks Start / Delta / End order and indices 0, 1, ...
    assert got.text == case.text
    assert got.reasoning == case.thought
    assert got.calls == [(name, args) for name, args in case.calls]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_one_token_at_a_time(case: Case) -> None:
    chunks = token_chunks(tokenizer(case.specials, case.words), case.output)
    _check(case, _drive(_adapter(case), chunks))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_random_splits(case: Case, seed: int) -> None:
    chunks = token_chunks(tokenizer(case.specials, case.words), case.output)
    _check(case, _drive(_adapter(case), random_splits(chunks, seed)))


@pytest.mark.parametrize("case", [c for c in CASES if c.tool], ids=[c.id for c in CASES if c.tool])
def test_text_alone_is_tokenized_by_the_adapter(case: Case) -> None:
    """`feed(text)` (a prefill, or what a `ReasoningSplitter` passes on) tokenizes the text itself."""
    parser = _adapter(case)
    chunks = token_chunks(tokenizer(case.specials, case.words), case.output)
    deltas: list[Delta] = []
    for text, _ids in chunks:
        deltas += parser.feed(text)
    _check(case, deltas + parser.finish())


# xlam's and pythonic's parsers send a call's arguments whole, once the call is complete
CODE_CASES = [
    c for c in CASES if any(name == "python" for name, _ in c.calls) and c.id not in ("pythonic", "xlam")
]


@pytest.mark.parametrize("case", CODE_CASES, ids=[c.id for c in CODE_CASES])
def test_a_code_call_streams_its_code(case: Case) -> None:
    """The code interpreter's `{"code": ...}` arguments arrive as JSON text in pieces; `CallTracker` decodes
    them with `JsonStringField("code")`, so the code reaches the client in pieces before the call ends."""
    parser = _adapter(case)
    chunks = token_chunks(tokenizer(case.specials, case.words), case.output)
    deltas = _drive(parser, chunks)
    code_index = next(d.index for d in deltas if isinstance(d, ToolCallStart) and d.name == "python")
    field = JsonStringField("code")
    pieces = []
    for d in deltas:
        if isinstance(d, ToolCallDelta) and d.index == code_index:
            piece = field.feed(d.arguments)
            if piece:
                pieces.append(piece)
        if isinstance(d, ToolCallEnd) and d.index == code_index:
            break
    pieces.append(field.finish())
    assert "".join(pieces) == CODE
    assert len([p for p in pieces if p]) > 3, pieces


def test_hermes_through_vllm_matches_ours() -> None:
    case = next(c for c in CASES if c.id == "hermes")
    chunks = token_chunks(tokenizer(case.specials), case.output)
    ours = get_parser("hermes")(TOOLS)
    mine: list[Delta] = []
    for text, _ids in chunks:
        mine += ours.feed(text)
    mine += ours.finish()
    theirs = _drive(_adapter(case), chunks)
    a, b = summarize(mine), summarize(theirs)
    assert (a.text.strip(), a.calls) == (b.text.strip(), b.calls)


def test_vllm_reasoning_in_front_of_our_tool_parser() -> None:
    """`--reasoning-parser` of vLLM's with one of our tool parsers: content goes on to ours."""
    case = Case("mix", None, "deepseek_r1", "", "", specials=("<think>", "</think>"))
    output = '<think>Weather first.</think>Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    parser = _adapter(case, inner=get_parser("hermes"))
    got = summarize(_drive(parser, token_chunks(tokenizer(case.specials), output)))
    assert (got.reasoning, got.text, got.calls) == (
        "Weather first.",
        "Sure. ",
        [("get_weather", {"city": "Oslo"})],
    )


def test_our_think_splitter_in_front_of_a_vllm_tool_parser() -> None:
    """The `<think>` route: our `ReasoningSplitter` passes text on, the adapter tokenizes it."""
    case = next(c for c in CASES if c.id == "kimi_k2")
    splitter = ReasoningSplitter(_adapter(case))
    deltas: list[Delta] = []
    for text, _ids in token_chunks(tokenizer(case.specials), "<think>Hmm.</think>" + case.output):
        deltas += splitter.feed(text)
    got = summarize(deltas + splitter.finish())
    assert (got.reasoning, got.text, got.calls) == ("Hmm.", case.text, [(n, a) for n, a in case.calls])


def test_a_parser_whose_markers_are_special_tokens_keeps_them() -> None:
    """vLLM's `adjust_request` asks hermes (and others) for `skip_special_tokens=False`; the engine obeys."""
    hermes = next(c for c in CASES if c.id == "hermes")
    assert _adapter(hermes).keep_special_tokens
    xlam = next(c for c in CASES if c.id == "xlam")
    assert not _adapter(xlam).keep_special_tokens


def test_no_tools_means_text() -> None:
    case = next(c for c in CASES if c.id == "hermes")
    tok = tokenizer(case.specials)
    parser = vllm_parser_factory("hermes", None, tok)(())
    got = summarize(_drive(parser, token_chunks(tok, "Just text.")))
    assert (got.text, got.calls) == ("Just text.", [])


def test_the_whole_output_is_parsed_when_streaming_found_no_call() -> None:
    """A streaming parser that let a complete call through as text: `finish()` parses the whole output once
    more (vLLM's non-streaming `extract_tool_calls`) and emits the call it finds."""
    from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser

    class TextOnlyStreaming(Hermes2ProToolParser):  # a real parser whose streaming misses every call
        def extract_tool_calls_streaming(self, *args: Any, **kwargs: Any) -> Any:
            from vllm.entrypoints.generate.base.protocol import DeltaMessage

            return DeltaMessage(content=args[2])

    from vllm.parser.abstract_parser import DelegatingParser

    class Composed(DelegatingParser):
        tool_parser_cls = TextOnlyStreaming

    case = next(c for c in CASES if c.id == "hermes")
    tok = tokenizer(case.specials)
    parser = VllmParserAdapter(Composed, tok, TOOLS)
    deltas = _drive(parser, token_chunks(tok, case.output))
    got = summarize(deltas)
    assert got.calls == [(n, a) for n, a in case.calls]
    assert got.text == case.output  # what streamed as text stays text
    assert isinstance(deltas[-1], ToolCallEnd)


def test_a_parser_that_raises_leaves_the_rest_as_text() -> None:
    from vllm.parser.abstract_parser import DelegatingParser
    from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser

    class Failing(Hermes2ProToolParser):
        def extract_tool_calls_streaming(self, *args: Any, **kwargs: Any) -> Any:
            if "{" in args[2]:
                raise ValueError("boom")
            return super().extract_tool_calls_streaming(*args, **kwargs)

    class Composed(DelegatingParser):
        tool_parser_cls = Failing

    tok = tokenizer(("<tool_call>", "</tool_call>"))
    parser = VllmParserAdapter(Composed, tok, TOOLS)
    deltas = _drive(parser, token_chunks(tok, 'ab{"x": 1}'))
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == 'ab{"x": 1}'
    assert not any(isinstance(d, (ToolCallStart, ReasoningDelta)) for d in deltas)


def test_a_call_without_arguments_gets_an_empty_object() -> None:
    case = next(c for c in CASES if c.id == "hermes")
    tok = tokenizer(case.specials)
    output = "<tool_call>\n" + json.dumps({"name": "get_weather", "arguments": {}}) + "\n</tool_call>"
    got = summarize(_drive(_adapter(case), token_chunks(tok, output)))
    assert got.calls == [("get_weather", {})]

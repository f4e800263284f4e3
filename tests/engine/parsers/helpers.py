"""Shared helpers for parser tests: run a parser over chunks and summarize its deltas."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from vllm_responses.engine.parsers import get_parser
from vllm_responses.engine.types import (
    Delta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)


@dataclass
class Result:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)


def run(parser: str, chunks: list[str]) -> list[Delta]:
    p = get_parser(parser)()
    out: list[Delta] = []
    for c in chunks:
        out += p.feed(c)
    return out + p.finish()


def check_grammar(deltas: list[Delta]) -> None:
    """Start before Delta before End, indices 0..n-1 in order, nothing after End."""
    state: dict[int, str] = {}
    for d in deltas:
        if isinstance(d, ToolCallStart):
            assert d.index == len(state) and d.index not in state
            state[d.index] = "open"
        elif isinstance(d, ToolCallDelta):
            assert state.get(d.index) == "open", d
        elif isinstance(d, ToolCallEnd):
            assert state.get(d.index) == "open", d
            state[d.index] = "closed"
    assert all(v == "closed" for v in state.values()), state


def summarize(deltas: list[Delta]) -> Result:
    check_grammar(deltas)
    r = Result()
    args: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for d in deltas:
        if isinstance(d, TextDelta):
            r.text += d.text
        elif isinstance(d, ReasoningDelta):
            r.reasoning += d.text
        elif isinstance(d, ToolCallStart):
            names[d.index], args[d.index] = d.name, []
        elif isinstance(d, ToolCallDelta):
            args[d.index].append(d.arguments)
    r.calls = [(names[i], json.loads("".join(args[i]))) for i in sorted(names)]
    return r


def split_at(text: str, points: list[int]) -> list[str]:
    pts = sorted({p % (len(text) + 1) for p in points})
    out, prev = [], 0
    for p in [*pts, len(text)]:
        out.append(text[prev:p])
        prev = p
    return out

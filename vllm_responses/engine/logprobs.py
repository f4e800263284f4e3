"""`TokenAligner`: vLLM's per-token logprobs handed to the visible text deltas those tokens wrote."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vllm_responses.engine.types import Delta, ReasoningDelta, TextDelta, TokenLogprob, ToolCallDelta

__all__ = ["TokenAligner", "token_spans"]

# What a logprob JSON cannot carry (-inf: a token the structured-output grammar masked) is reported as this,
# the figure OpenAI's API gives for such tokens.
FLOOR = -9999.0


def _finite(value: float) -> float:
    return value if math.isfinite(value) else FLOOR


def token_spans(text: str, pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Where each token of one engine chunk lies in that chunk's `text`, from the tokens' own decoded
    `pieces`: exact where the pieces spell the text; tokens matched from both ends; the tokens left in the
    middle (parts of one multi-byte character, a stop string the text leaves out) get an empty span except
    the last of them, which gets the middle text. So the spans tile the text, in order."""
    spans: list[tuple[int, int]] = []
    pos, first = 0, 0
    while first < len(pieces) and text.startswith(pieces[first], pos) and pieces[first]:
        spans.append((pos, pos + len(pieces[first])))
        pos += len(pieces[first])
        first += 1
    end, last = len(text), len(pieces)
    tail: list[tuple[int, int]] = []
    while last > first and pieces[last - 1] and text.endswith(pieces[last - 1], pos, end):
        tail.append((end - len(pieces[last - 1]), end))
        end -= len(pieces[last - 1])
        last -= 1
    middle = [(pos, pos)] * (last - first)
    if middle:
        middle[-1] = (pos, end)
    return [*spans, *middle, *reversed(tail)]


@dataclass
class _Token:
    start: int  # span in the whole output text (prefill included)
    end: int
    logprob: TokenLogprob


class TokenAligner:
    """Tracks where each generated token lies in a model call's output text and gives every visible text
    delta the logprobs of the tokens it shows, each token once, in order.

    - `prefill(text)`: text the engine wrote itself (no tokens, no logprobs).
    - `chunk(text, token_ids, logprobs)`: one vLLM output chunk (`CompletionOutput.logprobs`: per token, a
      mapping of token id to `Logprob(logprob, rank, decoded_token)`).
    - `attach(deltas)`: each `TextDelta` found (in order, from where the last delta found ended) in the
      output text gets the tokens whose spans overlap it (an empty span: lying inside it); tokens of
      markup, reasoning or tool calls are skipped (reasoning and argument deltas found verbatim move the
      search past them). A delta the parser changed (not found verbatim) gets none. A token only partly
      visible (markup and text in one token) is reported whole.
    """

    def __init__(self, top: int) -> None:
        self.top = top
        self._text = ""
        self._cursor = 0  # where the next visible delta is looked for
        self._tokens: deque[_Token] = deque()

    def prefill(self, text: str) -> None:
        self._text += text

    def chunk(
        self, text: str, token_ids: Sequence[int], logprobs: Sequence[Mapping[int, Any] | None] | None
    ) -> None:
        base = len(self._text)
        self._text += text
        if not logprobs:
            return
        chosen = [self._one(tid, pos or {}) for tid, pos in zip(token_ids, logprobs, strict=False)]
        spans = token_spans(text, [c.token for c in chosen])
        for (start, end), token in zip(spans, chosen, strict=True):
            piece = text[start:end]
            self._tokens.append(_Token(base + start, base + end, replace(token, token=piece)))

    def _one(self, token_id: int, position: Mapping[int, Any]) -> TokenLogprob:
        sampled = position.get(token_id)
        ranked = sorted(
            (p for p in position.values() if p.rank is not None and p.rank <= self.top), key=_rank
        )
        top = tuple((p.decoded_token or "", _finite(p.logprob)) for p in ranked[: self.top])
        if sampled is None:  # (vLLM always returns the sampled token's own)
            return TokenLogprob("", FLOOR, top)
        return TokenLogprob(sampled.decoded_token or "", _finite(sampled.logprob), top)

    def attach(self, deltas: list[Delta]) -> list[Delta]:
        out: list[Delta] = []
        for d in deltas:
            if isinstance(d, TextDelta) and d.text:
                d = replace(d, logprobs=d.logprobs + self._take(d.text))
            elif isinstance(d, ReasoningDelta):
                self._take(d.text)  # passed over, so that later text is not looked for inside it
            elif isinstance(d, ToolCallDelta):
                self._take(d.arguments)
            out.append(d)
        return out

    def _take(self, text: str) -> tuple[TokenLogprob, ...]:
        """The tokens of `text`, found at or after the cursor (none where it is not found verbatim)."""
        at = self._text.find(text, self._cursor) if text else -1
        if at < 0:
            return ()
        end = at + len(text)
        self._cursor = end
        shown: list[TokenLogprob] = []
        while self._tokens and self._tokens[0].start < end:
            token = self._tokens.popleft()
            if token.end > at or at <= token.start:
                shown.append(token.logprob)
        return tuple(shown)


def _rank(p: Any) -> int:
    return int(p.rank)

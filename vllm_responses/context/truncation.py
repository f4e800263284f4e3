"""`truncation: "auto"`: the oldest turns dropped until the first model call's prompt fits the context window.

Counted with the engine's own rendering and tokenizer (`Engine.count_tokens`), leaving room for the output.
Never dropped: the leading system/developer messages (`instructions`), the last user message and what
follows it; a tool call and its output go together. What is dropped is only hidden from the model: the
stored history keeps every item.
"""

from __future__ import annotations

from dataclasses import replace

from vllm_responses.engine.base import Engine
from vllm_responses.engine.types import GenerateRequest, Message, ToolCall, ToolResult, Turn

__all__ = ["ELIDED", "cut_points", "fit_context", "fit_loop", "instructions_length", "output_reserve"]

# What the model reads in place of a tool output left out to fit the context window.
ELIDED = "[this earlier tool output was left out to fit the context window]"


def output_reserve(window: int, max_output_tokens: int | None) -> int:
    """Tokens kept free for the output: `max_output_tokens` (at most half the window), else an eighth."""
    if max_output_tokens is not None:
        return min(max_output_tokens, window // 2)
    return window // 8


def instructions_length(turns: tuple[Turn, ...]) -> int:
    """How many system/developer messages lead the turns (the instructions: never dropped)."""
    for n, turn in enumerate(turns):
        if not (isinstance(turn, Message) and turn.role in ("system", "developer")):
            return n
    return len(turns)


def cut_points(turns: tuple[Turn, ...]) -> list[int]:
    """Ascending positions `p` at which `turns[head:p]` may be dropped (`head`, the leading system messages,
    first: nothing dropped): up to the last user message, never between a tool call and its output."""
    head = instructions_length(turns)
    users = [i for i, t in enumerate(turns) if isinstance(t, Message) and t.role == "user"]
    last = users[-1] if users else len(turns) - 1
    spans: dict[str, list[int]] = {}
    for i, t in enumerate(turns):
        if isinstance(t, (ToolCall, ToolResult)):
            spans.setdefault(t.call_id, []).append(i)
    splits = [(min(ix), max(ix)) for ix in spans.values()]
    return [p for p in range(head, max(head, last) + 1) if not any(lo < p <= hi for lo, hi in splits)]


async def fit_context(
    engine: Engine, first_call: GenerateRequest, max_output_tokens: int | None
) -> tuple[Turn, ...]:
    """The turns of `first_call` with the fewest oldest ones dropped so that its prompt leaves
    `output_reserve` tokens of the context window free; as many as may be dropped when none fits (the
    engine then refuses the prompt as too long, or runs it with less room)."""
    turns = first_call.turns
    limit = engine.max_model_len - output_reserve(engine.max_model_len, max_output_tokens)
    head = instructions_length(turns)

    def kept(p: int) -> tuple[Turn, ...]:
        return turns[:head] + turns[p:]

    async def fits(p: int) -> bool:
        return await engine.count_tokens(replace(first_call, turns=kept(p))) <= limit

    cuts = cut_points(turns)
    if await fits(cuts[0]):
        return turns
    lo, hi = 1, len(cuts) - 1  # the answer is the first cut that fits, else the last
    while lo < hi:
        mid = (lo + hi) // 2
        if await fits(cuts[mid]):
            hi = mid
        else:
            lo = mid + 1
    return kept(cuts[min(lo, len(cuts) - 1)])


async def fit_loop(engine: Engine, call: GenerateRequest, max_output_tokens: int | None) -> tuple[Turn, ...]:
    """A later model call of a tool loop fitted: `fit_context`, then, while the prompt still does not fit, the
    outputs of the oldest tool results after the last user message replaced by `ELIDED` (the fewest that
    make it fit; every one but the latest when none does)."""
    turns = await fit_context(engine, call, max_output_tokens)
    limit = engine.max_model_len - output_reserve(engine.max_model_len, max_output_tokens)
    users = [i for i, t in enumerate(turns) if isinstance(t, Message) and t.role == "user"]
    after = users[-1] + 1 if users else 0
    results = [i for i, t in enumerate(turns) if i >= after and isinstance(t, ToolResult)][:-1]

    def elided(n: int) -> tuple[Turn, ...]:
        gone = set(results[:n])
        return tuple(
            replace(t, output=ELIDED) if i in gone and isinstance(t, ToolResult) else t
            for i, t in enumerate(turns)
        )

    async def fits(n: int) -> bool:
        return await engine.count_tokens(replace(call, turns=elided(n))) <= limit

    if not results or await fits(0):
        return turns
    lo, hi = 1, len(results)
    while lo < hi:
        mid = (lo + hi) // 2
        if await fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return elided(lo)

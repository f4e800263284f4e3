"""Where a prompt's rendering and tokenizing run: on the event loop for a short prompt, in a tokenizer thread
for a long one, so that the event loop keeps streaming meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from vllm_responses.engine.types import GenerateRequest, Message, ToolCall, ToolResult, Turn
from vllm_responses.executors import TOKENIZE, run_on

__all__ = ["PRECHECK_INLINE_CHARS", "run_sized"]

# Prompts of fewer characters than this are prechecked on the event loop (a thread hop costs more than it saves).
PRECHECK_INLINE_CHARS = 16_384


def _text_size(request: GenerateRequest) -> int:
    """How many characters the turns and the tools hold (what rendering, tokenizing and converting custom
    tools' grammars take time over); an image weighs as much as a long prompt (decoding and processing it take
    milliseconds), so a request with images is always worked on in a thread."""
    turns = sum(len(_turn_text(t)) for t in request.turns)
    images = sum(len(t.images) for t in request.turns if isinstance(t, (Message, ToolResult)))
    turns += images * PRECHECK_INLINE_CHARS
    return turns + sum(len(t.description) + len(t.grammar[1] if t.grammar else "") for t in request.tools)


def _turn_text(turn: Turn) -> str:
    if isinstance(turn, ToolCall):
        return turn.arguments
    return turn.output if isinstance(turn, ToolResult) else turn.text


_T = TypeVar("_T")


async def run_sized(work: Callable[[GenerateRequest], _T], request: GenerateRequest) -> _T:
    """`work(request)` (rendering and tokenizing its prompt) on the event loop for a short prompt, in a worker
    thread for one of `PRECHECK_INLINE_CHARS` or more, so that the loop keeps streaming meanwhile."""
    if _text_size(request) < PRECHECK_INLINE_CHARS:
        return work(request)
    return await run_on(TOKENIZE, work, request)

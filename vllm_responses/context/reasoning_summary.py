"""`reasoning.summary: "concise"`: a long reasoning summarised by the served model in one small call of its own.

The call's prompt is fixed (`SUMMARY_SYSTEM`, then the reasoning and `SUMMARY_ASK`), asks for no reasoning of
its own (`reasoning_effort` "none") and is capped at `SUMMARY_MAX_TOKENS`; only its text is the summary. A
reasoning of at most `--concise-summary-over` characters is its own summary, with no call (`needs_summary`).
"""

from __future__ import annotations

import secrets
from contextlib import aclosing

from vllm_responses.engine.base import Engine
from vllm_responses.engine.types import Finish, GenerateRequest, Message, Sampling, TextDelta, Usage

__all__ = ["SUMMARY_MAX_TOKENS", "needs_summary", "summarise_reasoning"]

SUMMARY_MAX_TOKENS = 128

SUMMARY_SYSTEM = (
    "You summarise an assistant's private reasoning for the user who asked. Write one to three short "
    "sentences in plain prose saying what the assistant considered and concluded."
)
SUMMARY_ASK = "Summarise the reasoning above in at most three short sentences. Write only the summary."


def needs_summary(reasoning: str, over: int) -> bool:
    """Whether `reasoning` is longer than `over` characters: summarised apart from it."""
    return len(reasoning.strip()) > over


async def summarise_reasoning(engine: Engine, reasoning: str, request_id: str) -> tuple[str, Usage]:
    """One call to the served model: the reasoning in, its short summary and the call's usage out. An empty
    answer leaves the reasoning as its own summary."""
    request = GenerateRequest(
        request_id=f"{request_id}-summary-{secrets.token_hex(4)}",
        turns=(
            Message("system", SUMMARY_SYSTEM),
            Message(
                "user", f"The reasoning:\n\n{reasoning.strip()}\n\n(end of the reasoning)\n\n{SUMMARY_ASK}"
            ),
        ),
        tool_choice="none",
        sampling=Sampling(max_tokens=SUMMARY_MAX_TOKENS, temperature=0.0),
        reasoning_effort="none",
    )
    text: list[str] = []
    finish = Finish("stop", Usage())
    async with aclosing(engine.generate(request)) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Finish):
                finish = event
    summary = "".join(text).strip()
    return summary or reasoning, finish.usage

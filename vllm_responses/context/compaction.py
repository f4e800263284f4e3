"""Compaction: the served model summarises the older part of a conversation into one opaque `compaction` item.

The conversation's items split in three (`split`): system / developer messages, kept verbatim; the older
items, summarised by one call to the served model (`_summarise`); the recent items, from the last user
message on (the question being answered and the tool calls and outputs of the work on it), kept
verbatim. The compacted context is `[*kept messages, compaction item, *recent items]`: `context_management` on
create replaces the model's context with it once the context passes `compact_threshold` tokens
(`over_threshold`, then `compact`). `POST /v1/responses/compact` shapes its window as OpenAI's does
(`compact_window`): the user, system and developer messages kept, then one compaction item, last, standing for
everything else (the assistant's messages, tool calls and outputs, reasoning, earlier compaction items).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from vllm_responses.context.truncation import instructions_length
from vllm_responses.context.turns import SUMMARY_HEADER, items_to_turns
from vllm_responses.engine.base import Engine
from vllm_responses.engine.types import (
    Finish,
    GenerateRequest,
    Message,
    Sampling,
    TextDelta,
    ToolCall,
    ToolResult,
    Turn,
    Usage,
)
from vllm_responses.protocol.compaction import (
    CompactionItem,
    ContextManagement,
    seal_summary,
)
from vllm_responses.protocol.ids import new_id

__all__ = [
    "SUMMARY_MAX_TOKENS",
    "Compaction",
    "compact",
    "compact_loop",
    "compact_window",
    "over_threshold",
    "split",
    "transcript",
]

# The summary's length cap, in tokens, and at most this share of the summarising prompt's tokens.
SUMMARY_MAX_TOKENS = 512
SUMMARY_MAX_SHARE = 1 / 3

SUMMARY_SYSTEM = (
    "You compress conversations. You are given the transcript of a conversation between a user and an "
    "assistant (with any tool calls and their outputs). Write a concise summary of it that lets the "
    "assistant continue the conversation without the transcript."
)
SUMMARY_ASK = (
    "Summarise the conversation so far. Keep every fact, number, name, decision and open task exactly as "
    "stated (numbers digit for digit); drop greetings and repetition. Write only the summary."
)


@dataclass(frozen=True)
class Compaction:
    """A compacted context: `items` (in wire form) stand for the items given; `item` is the compaction item
    among them (None: nothing was old enough to summarise, `items` are the items given); `usage` is the
    summarising call's."""

    items: list[dict[str, Any]]
    item: CompactionItem | None
    usage: Usage


def _is_message(item: dict[str, Any], *roles: str) -> bool:
    return item.get("type", "message") == "message" and item.get("role") in roles


def split(
    items: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(system / developer messages before the recent part, the older items to summarise, the recent
    items from the last user message on). No user message: everything is recent."""
    last_user = max((i for i, it in enumerate(items) if _is_message(it, "user")), default=0)
    head = items[:last_user]
    kept = [it for it in head if _is_message(it, "system", "developer")]
    older = [it for it in head if not _is_message(it, "system", "developer")]
    return kept, older, items[last_user:]


def transcript(turns: list[Turn]) -> str:
    """Turns as plain text the summarising call reads (any chat template renders one user turn)."""
    lines = []
    for t in turns:
        if isinstance(t, Message):
            lines.append(f"{t.role}: {t.text}")
        elif isinstance(t, ToolCall):
            lines.append(f"assistant called tool {t.name}: {t.arguments}")
        elif isinstance(t, ToolResult):
            lines.append(f"tool {t.name} returned: {t.output}")
    return "\n\n".join(lines)


async def _summarise(
    engine: Engine, turns: Sequence[Turn], structured: dict[str, Any] | None
) -> tuple[str, Usage]:
    """One call to the served model: the older turns' transcript in, their summary out."""
    request = GenerateRequest(
        request_id=f"compact-{secrets.token_hex(6)}",
        turns=(
            Message("system", SUMMARY_SYSTEM),
            Message(
                "user",
                f"The conversation:\n\n{transcript(list(turns))}\n\n(end of the conversation)\n\n"
                + SUMMARY_ASK,
            ),
        ),
        tool_choice="none",
    )
    # Shorter than what it summarises, whatever the model does (small models loop until the cap).
    cap = min(SUMMARY_MAX_TOKENS, max(16, int(await engine.count_tokens(request) * SUMMARY_MAX_SHARE)))
    sampling = Sampling(max_tokens=cap, temperature=0.0, structured=structured)
    text: list[str] = []
    finish = Finish("stop", Usage())
    async for event in engine.generate(replace(request, sampling=sampling)):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, Finish):
            finish = event
    return _tidy("".join(text), cut=finish.reason == "length"), finish.usage


def _tidy(text: str, *, cut: bool) -> str:
    """The summary without sentences that repeat an earlier one (a small model's loops) and, when the
    cap `cut` it, without its unfinished last sentence."""
    sentences = re.split(r"(?<=[.!?\n])\s+", text.strip())
    if cut and len(sentences) > 1:
        sentences.pop()
    seen: set[str] = set()
    kept = []
    for sentence in sentences:
        key = sentence.strip().lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(sentence.strip())
    return " ".join(kept)


async def compact(
    engine: Engine, items: list[dict[str, Any]], *, structured: dict[str, Any] | None = None
) -> Compaction:
    """The items compacted: their older part summarised by the served model (see the module docstring).
    `structured` (vendor extension) forces the summary's text as `Sampling.structured` does. With nothing old
    enough to summarise, the items as given (`item` None)."""
    kept, older, recent = split(items)
    if not older:
        return Compaction(list(items), None, Usage())
    summary, usage = await _summarise(engine, items_to_turns(older), structured)
    item = _compaction_item(summary)
    return Compaction([*kept, dict(item), *recent], item, usage)


async def compact_window(
    engine: Engine, items: list[dict[str, Any]], *, structured: dict[str, Any] | None = None
) -> Compaction:
    """`/responses/compact`: the user, system and developer messages kept, then one compaction item, last. It
    summarises the conversation up to the last item of any other kind (the messages before it read for their
    context, the system and developer ones left out: they are kept); with none, it is empty, made with no
    model call, and says nothing to the model when it comes back."""
    kept = [it for it in items if _is_message(it, "user", "system", "developer")]
    last = max(
        (i for i, it in enumerate(items) if not _is_message(it, "user", "system", "developer")), default=-1
    )
    read = [it for it in items[: last + 1] if not _is_message(it, "system", "developer")]
    summary, usage = (
        await _summarise(engine, items_to_turns(read), structured) if last >= 0 else ("", Usage())
    )
    item = _compaction_item(summary)
    return Compaction([*kept, dict(item)], item, usage)


def _compaction_item(summary: str) -> CompactionItem:
    return {"id": new_id("cmp"), "type": "compaction", "encrypted_content": seal_summary(summary)}


async def over_threshold(engine: Engine, entry: ContextManagement, first_call: GenerateRequest) -> bool:
    """Whether `first_call` (the response's first model call, as `Engine.count_tokens` renders it) passes
    `compact_threshold` tokens: a create's compaction is due."""
    return await engine.count_tokens(first_call) > entry.compact_threshold


async def compact_loop(
    engine: Engine, entry: ContextManagement, call: GenerateRequest
) -> tuple[tuple[Turn, ...], Usage] | None:
    """`context_management` inside a tool loop: when a later model call passes `compact_threshold`, its turns
    with everything but the leading system messages, the last user message and the latest tool exchange
    summarised into one user turn (placed before that user message; the latest exchange is the last tool
    call with its result, and what follows); None when under the threshold or
    nothing is left to summarise. Only the loop's prompt changes: the response's items keep every step."""
    if await engine.count_tokens(call) <= entry.compact_threshold:
        return None
    turns = call.turns
    head = instructions_length(turns)
    last_user = max(
        (i for i, t in enumerate(turns) if isinstance(t, Message) and t.role == "user"), default=head
    )
    results = [t for t in turns[last_user + 1 :] if isinstance(t, ToolResult)]
    latest = results[-1].call_id if results else None  # the latest call and its result are kept
    tail = next(
        (i for i, t in enumerate(turns) if i > last_user and isinstance(t, ToolCall) and t.call_id == latest),
        len(turns),
    )
    older = turns[head:last_user] + turns[last_user + 1 : tail]
    if not older or last_user < head:
        return None
    summary, usage = await _summarise(engine, older, entry.structured_outputs)
    compacted = (
        *turns[:head],
        Message("user", f"{SUMMARY_HEADER}\n{summary}"),
        turns[last_user],
        *turns[tail:],
    )
    return compacted, usage

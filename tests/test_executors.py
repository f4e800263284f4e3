"""executors.py: each kind of blocking work runs on its own named threads; and the long prompts `run_sized` hands off
(engine/sized_work.py) go to the tokenising threads, not asyncio's default executor."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from vllm_responses.engine.sized_work import PRECHECK_INLINE_CHARS, run_sized
from vllm_responses.engine.types import GenerateRequest, Message
from vllm_responses.executors import FILE_TEXT, IMAGES, RESOLVE, TOKENIZE, run_on

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def _thread(_request: object = None) -> str:
    return threading.current_thread().name


async def test_each_kind_runs_on_threads_named_for_it() -> None:
    names = [await run_on(pool, _thread) for pool in (TOKENIZE, IMAGES, FILE_TEXT, RESOLVE)]
    assert [name.rsplit("_", 1)[0] for name in names] == ["tokenize", "image-check", "file-text", "resolve"]


async def test_a_kind_busy_to_its_last_thread_does_not_hold_up_another() -> None:
    release = threading.Event()
    held = [asyncio.ensure_future(run_on(IMAGES, release.wait)) for _ in range(IMAGES._max_workers)]
    try:
        assert (await run_on(FILE_TEXT, _thread)).startswith("file-text")
        assert not any(task.done() for task in held)
    finally:
        release.set()
        await asyncio.gather(*held)


async def test_the_callers_context_goes_along() -> None:
    _SEEN.set("caller")
    assert await run_on(RESOLVE, _SEEN.get) == "caller"


async def test_a_long_prompt_is_tokenised_on_the_tokenising_threads() -> None:
    short = GenerateRequest("r1", (Message("user", "hi"),))
    long = GenerateRequest("r2", (Message("user", "x" * PRECHECK_INLINE_CHARS),))
    assert await run_sized(_thread, short) == threading.current_thread().name
    assert (await run_sized(_thread, long)).startswith("tokenize_")

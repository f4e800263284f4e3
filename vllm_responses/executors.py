"""Threads for the server's blocking work, one small pool per kind, so that one kind cannot starve another.

Tokenizing long prompts, checking images, decoding text files, resolving host names, searching (a tool
search's index and scoring, a web search's answer parsed) and writing large embedding answers as JSON each
have their own
`ThreadPoolExecutor` (threads named after it), not asyncio's default one: a burst of one kind of work waits
for its own threads only. PDFs are not read here but in processes of their own (context/extraction.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["EMBEDDINGS", "FILE_TEXT", "IMAGES", "RESOLVE", "SEARCH", "TOKENIZE", "run_on"]

TOKENIZE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tokenize")
IMAGES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="image-check")
FILE_TEXT = ThreadPoolExecutor(max_workers=2, thread_name_prefix="file-text")
RESOLVE = ThreadPoolExecutor(max_workers=4, thread_name_prefix="resolve")
SEARCH = ThreadPoolExecutor(max_workers=2, thread_name_prefix="search")
EMBEDDINGS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embeddings-json")

_P = ParamSpec("_P")
_T = TypeVar("_T")


async def run_on(
    executor: ThreadPoolExecutor, func: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
) -> _T:
    """`func(*args, **kwargs)` in one of `executor`'s threads, in a copy of the caller's context (as
    `asyncio.to_thread` runs it in the default executor's)."""
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(executor, call)

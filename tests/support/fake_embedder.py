"""`FakeEmbedder`: an `Embedder` of set vectors (a text's are its bytes' sums), blocking on a gate when told to."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.embedder import Embedded, EmbedInput

__all__ = ["FakeEmbedder", "fake_vector"]

DIMS = 8


def fake_vector(item: EmbedInput) -> list[float]:
    """The fake's vector for `item`: its code points (or ids) folded into `DIMS` sums, scaled to length 1."""
    values = [ord(c) for c in item] if isinstance(item, str) else list(item)
    sums = [1.0 + sum(v for j, v in enumerate(values) if j % DIMS == i) for i in range(DIMS)]
    norm = math.sqrt(sum(s * s for s in sums))
    return [s / norm for s in sums]


class FakeEmbedder:
    """An `Embedder` whose inputs are one token per character (or id); an input over `max_input_tokens` is
    refused as the real one refuses it; while `gate` is set and not open, each call waits on it (`running`
    counts the calls inside)."""

    def __init__(self, name: str = "fake-embedder", max_input_tokens: int = 64) -> None:
        self._name = name
        self._max = max_input_tokens
        self.gate: threading.Event | None = None  # set by the test's thread: calls wait in a worker thread
        self.running = 0
        self.calls: list[list[Any]] = []
        self.dead = False

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def dimensions(self) -> int:
        return DIMS

    @property
    def max_input_tokens(self) -> int:
        return self._max

    async def count_tokens(self, inputs: Sequence[EmbedInput]) -> list[int]:
        return [len(x) for x in inputs]

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded:
        self.calls.append(list(inputs))
        for i, item in enumerate(inputs):
            if len(item) > self._max:
                raise EngineRejected(f"input[{i}] is over {self._max} tokens", code="context_length_exceeded")
        self.running += 1
        try:
            if self.gate is not None:
                await asyncio.to_thread(self.gate.wait)
        finally:
            self.running -= 1
        return Embedded([fake_vector(x) for x in inputs], sum(len(x) for x in inputs))

    async def aclose(self) -> None:
        pass

    @asynccontextmanager
    async def opener(self, config: Any) -> AsyncIterator[FakeEmbedder]:
        """An `EmbedderOpener` that always opens this fake."""
        yield self

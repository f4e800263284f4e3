"""The `Embedder` interface (texts or token ids in, vectors out) and `LazyEmbedder`, one loaded on first use."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vllm_responses.engine.base import EngineUnavailable

__all__ = ["EmbedInput", "Embedded", "Embedder", "LazyEmbedder"]

_log = logging.getLogger(__name__)

# One input: a text, or the model's token ids.
EmbedInput = str | Sequence[int]


@dataclass(frozen=True)
class Embedded:
    """The vectors of a call's inputs, in their order, and the tokens the model read for them in all."""

    vectors: list[list[float]]
    tokens: int


class Embedder(Protocol):
    """An embedding model. `embed` raises `EngineRejected` (param `input`) for an input the model cannot
    take (too long, a token id outside its vocabulary), `EngineUnavailable` when it cannot serve."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimensions(self) -> int:
        """The length of the model's vectors."""
        ...

    @property
    def max_input_tokens(self) -> int | None:
        """The most tokens one input may have; None where the model's server decides (a remote one)."""
        ...

    async def count_tokens(self, inputs: Sequence[EmbedInput]) -> list[int]:
        """The tokens each input is to the model (a remote model's texts: an estimate, 4 bytes a token)."""
        ...

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded: ...

    @property
    def dead(self) -> bool:
        """Whether it died and serves nothing more (its engine process gone); a remote one never is."""
        ...

    async def aclose(self) -> None: ...


class LazyEmbedder:
    """An `Embedder` whose model is loaded by the first call that needs it (`load`: seconds), once for
    concurrent callers; a load that fails is tried again by the next call, and so is a model that died. Its
    name, dimensions and input bound are known before the load (read from the model's folder)."""

    def __init__(
        self,
        load: Callable[[], Awaitable[Embedder]],
        *,
        model_name: str,
        dimensions: int,
        max_input_tokens: int | None,
    ) -> None:
        self._load = load
        self._model_name = model_name
        self._dimensions = dimensions
        self._max_input_tokens = max_input_tokens
        self._loaded: Embedder | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def max_input_tokens(self) -> int | None:
        return self._max_input_tokens

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    async def model(self) -> Embedder:
        """The loaded model, loading it now if no call has yet (or the one loaded died)."""
        if self._loaded is not None and not self._loaded.dead:
            return self._loaded
        async with self._lock:
            if self._closed:
                raise EngineUnavailable("the embedding model is shut down")
            if self._loaded is not None and self._loaded.dead:
                _log.warning("the embedding model %s died: loading it again", self._model_name)
                dead, self._loaded = self._loaded, None
                await dead.aclose()
            if self._loaded is None:
                t0 = time.monotonic()
                _log.info("loading the embedding model %s (first use)", self._model_name)
                try:
                    self._loaded = await self._load()
                except Exception as exc:  # why is for the log (it may name paths): the client reads a 503
                    _log.warning("the embedding model %s could not be loaded: %s", self._model_name, exc)
                    raise EngineUnavailable("The embedding model could not be loaded; retry later.") from exc
                _log.info("embedding model ready in %.1f s", time.monotonic() - t0)
                if self._loaded.dimensions != self._dimensions:  # its folder said otherwise: the model wins
                    self._dimensions = self._loaded.dimensions
            return self._loaded

    @property
    def dead(self) -> bool:
        return False  # a dead model is loaded again by the next call

    async def count_tokens(self, inputs: Sequence[EmbedInput]) -> list[int]:
        return await (await self.model()).count_tokens(inputs)

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded:
        return await (await self.model()).embed(inputs)

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            loaded, self._loaded = self._loaded, None
        if loaded is not None:
            await loaded.aclose()

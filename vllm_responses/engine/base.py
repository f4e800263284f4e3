"""The engine interface the agent loop talks to; `vllm.py` implements it with vLLM's AsyncLLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from vllm_responses.chat import EngineEvent, GenerateRequest

__all__ = ["Engine", "EngineError"]


class EngineError(Exception):
    """The engine could not serve a call (bad prompt, engine dead, out of context). Carries a message
    safe to show to the client; `status` is the HTTP status it maps to before streaming starts."""

    def __init__(self, message: str, *, status: int = 500, code: str = "engine_error") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


@runtime_checkable
class Engine(Protocol):
    """A model that streams output for one call at a time per request (many requests concurrently).

    `generate` yields text / reasoning / tool-call deltas and ends with exactly one `Finish`. Closing
    or cancelling the iterator before the `Finish` aborts the request inside the engine.
    """

    @property
    def model_name(self) -> str: ...

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineEvent]: ...

    async def count_tokens(self, request: GenerateRequest) -> int:
        """Prompt tokens `generate(request)` would feed the model (for `/v1/responses/input_tokens`)."""
        ...

    async def aclose(self) -> None: ...

"""The engine interface the agent loop talks to; `vllm.py` implements it with vLLM's AsyncLLM."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

from vllm_responses.engine.types import EngineEvent, GenerateRequest

__all__ = ["Engine", "EngineError", "EngineRejected", "EngineUnavailable"]


class EngineError(Exception):
    """The engine could not serve a call. Carries a message safe to show to the client and a short `code`
    (`errors.api_error` maps it to an API error: the engine's own fault by default)."""

    def __init__(self, message: str, *, code: str = "engine_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class EngineRejected(EngineError):
    """The call itself cannot be served (prompt longer than the context, a template that refuses the
    turns, bad sampling values): the client's request is at fault, at `param` (default: its input)."""

    def __init__(self, message: str, *, code: str = "engine_error", param: str = "input") -> None:
        super().__init__(message, code=code)
        self.param = param


class EngineUnavailable(EngineError):
    """The engine is shut down, died or aborted the call: nothing about the request is wrong."""


class Engine(Protocol):
    """A model that streams output for one call at a time per request (many requests concurrently).

    `generate` yields text / reasoning / tool-call deltas and ends with exactly one `Finish`. Closing
    or cancelling the iterator before the `Finish` aborts the request inside the engine.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def takes_images(self) -> bool:
        """Whether the served model reads images (`Message.images`, `ToolResult.images`); a text-only model's
        engine ignores `ToolResult.images` (the text says what was shown) and callers refuse input images."""
        ...

    @property
    def max_model_len(self) -> int:
        """The context window in tokens: prompt and output together."""
        ...

    @property
    def default_sampling(self) -> Mapping[str, Any]:
        """Sampling values applied when a request leaves them unset (the model's generation config, e.g.
        `{"temperature": 0.6, "top_p": 0.95}`); a field absent here takes vLLM's default."""
        ...

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]: ...

    async def count_tokens(self, request: GenerateRequest) -> int:
        """Prompt tokens `generate(request)` would feed the model (for `/v1/responses/input_tokens`)."""
        ...

    # --- admission ---
    @property
    def max_num_seqs(self) -> int:
        """Requests the engine runs at once (vLLM's `max_num_seqs`, over its data-parallel ranks): the default
        of `--max-concurrent-responses`."""
        ...

    async def precheck(self, request: GenerateRequest) -> int:
        """Raise `EngineRejected` for what `generate(request)` would refuse before any output (a prompt that
        leaves no room in the context, sampling values or constraints the engine refuses), with the model's
        own rendering and tokenizer; return how many tokens the prompt has. Run before a response is
        started."""
        ...

    @property
    def dead(self) -> str | None:
        """None while the engine can serve; once it died (never after `aclose`), why. It does not come back."""
        ...

    async def ping(self) -> None:
        """A round trip to the engine (its scheduler answers between steps); raises `EngineUnavailable`."""
        ...

    async def aclose(self) -> None: ...

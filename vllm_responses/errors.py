"""Domain errors → API errors: `api_error` decides the status, type and code of an engine or sandbox error.

The layers below raise their own domain errors (`engine.base.EngineError` and its subclasses,
`interpreter_service.InterpreterError` and its subclasses); `api_error` is the one mapping from those to the
API error tree (`protocol.errors`), used both by the app (an `{"error": {...}}` body before anything was
streamed) and by the agent loop (the `error` of `response.failed` once a stream has started, its code by
`failure_code`). A 503 says what is unavailable and never why in the sandbox's own words (which may name
internal addresses or paths): those are logged.
"""

from __future__ import annotations

import logging

from interpreter_service.api import (
    ContainerNotFound,
    InterpreterError,
    MemoryLimitRefused,
    PoolExhausted,
    QuotaExceeded,
)
from vllm_responses.engine.base import EngineError, EngineRejected, EngineUnavailable
from vllm_responses.protocol.errors import APIError, Busy, InvalidRequest, NotFound, Unavailable

__all__ = ["DOMAIN_ERRORS", "api_error", "failure_code"]

logger = logging.getLogger(__name__)


# The exception classes `api_error` maps (the app registers one handler for each).
DOMAIN_ERRORS: tuple[type[Exception], ...] = (APIError, EngineError, InterpreterError)


def api_error(exc: BaseException) -> APIError:
    """The API error a domain error is answered with: the one place that decides status, type and code."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, EngineRejected):
        return InvalidRequest(exc.message, param=exc.param, code=exc.code)
    if isinstance(exc, EngineUnavailable):
        return Unavailable(exc.message, code=exc.code)
    if isinstance(exc, EngineError):
        return APIError(exc.message, code=exc.code)
    if isinstance(exc, ContainerNotFound):
        return NotFound(str(exc) or "Container not found or expired.", param="container_id")
    if isinstance(exc, MemoryLimitRefused):
        return InvalidRequest(f"The memory_limit cannot be granted: {exc}.", param="memory_limit")
    if isinstance(exc, QuotaExceeded):
        return Busy(
            f"This project's code-interpreter containers are all it may hold ({exc}); retry later or delete "
            "one of its containers.",
            code="container_quota_exceeded",
        )
    if isinstance(exc, PoolExhausted):
        return Busy(
            f"Every code-interpreter sandbox is busy running code ({exc}); retry later or delete a container.",
            code="pool_exhausted",
        )
    if isinstance(exc, InterpreterError):  # its text may name the sandbox's internals: for the log only
        logger.warning("the code-interpreter sandbox failed: %s", exc)
        return Unavailable(
            "The code-interpreter sandbox is unavailable; retry later.", code="sandbox_unavailable"
        )
    return APIError("The server had an error processing the request.")


def failure_code(error: APIError) -> str:
    """`error.code` of a `response.failed` event: one of the fixed codes the SDK's `ResponseError` allows."""
    if isinstance(error, Busy):
        return "rate_limit_exceeded"
    if 400 <= error.status < 500:
        return "invalid_prompt"
    return "server_error"

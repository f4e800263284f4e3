"""The gateway's exception tree, each class carrying its OpenAI error `type`, `code`, `param` and HTTP status.

    APIError (500 server_error)
    ├── InvalidRequest (400 invalid_request_error)  bad field, unsupported value
    │   └── NotFound (404)                            unknown response / container / file id
    ├── Unauthorized (401 authentication_error)
    ├── Conflict (409 invalid_request_error)          e.g. cancelling a response that is not background
    ├── PayloadTooLarge (413 invalid_request_error)   a body past --max-request-bytes / --max-upload-bytes
    ├── Busy (429 rate_limit_error)                   every sandbox is running code; the server is at capacity
    │                                                 (admission.py: with `Retry-After`): retry later
    └── Unavailable (503 server_error)                engine or sandbox not ready / could not start

The layers below raise their own domain errors (`engine.base.EngineError` and its subclasses,
`interpreter_service.InterpreterError` and its subclasses); `api_error` is the one mapping from those to
the tree above, used both by `app.py` (an `{"error": {...}}` body before anything was streamed) and by
the agent loop (the `error` of `response.failed` once a stream has started, its code by `failure_code`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interpreter_service.api import ContainerNotFound, InterpreterError, MemoryLimitRefused, PoolExhausted
from vllm_responses.engine.base import EngineError, EngineRejected, EngineUnavailable

__all__ = [
    "APIError",
    "Busy",
    "Conflict",
    "DOMAIN_ERRORS",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "Unauthorized",
    "Unavailable",
    "api_error",
    "error_body",
    "failure_code",
]


class APIError(Exception):
    status = 500
    type = "server_error"
    default_code: str | None = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code
        self.headers = dict(headers) if headers else None  # sent with the HTTP answer (e.g. `Retry-After`)

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, param=self.param, code=self.code)


class InvalidRequest(APIError):
    status = 400
    type = "invalid_request_error"
    default_code = "invalid_value"


class NotFound(InvalidRequest):
    status = 404
    default_code = "not_found"


class Unauthorized(APIError):
    status = 401
    type = "authentication_error"
    default_code = "invalid_api_key"


class Conflict(APIError):
    status = 409
    type = "invalid_request_error"
    default_code = "conflict"


class PayloadTooLarge(APIError):
    status = 413
    type = "invalid_request_error"
    default_code = "request_too_large"


class Busy(APIError):
    status = 429
    type = "rate_limit_error"
    default_code = "rate_limit_exceeded"


class Unavailable(APIError):
    status = 503
    type = "server_error"
    default_code = "unavailable"


def error_body(
    message: str, type_: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


# The exception classes `api_error` maps (the app registers one handler for each).
DOMAIN_ERRORS: tuple[type[Exception], ...] = (APIError, EngineError, InterpreterError)


def api_error(exc: BaseException) -> APIError:
    """The API error a domain error is answered with: the one place that decides status, type and code."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, EngineRejected):
        return InvalidRequest(exc.message, param="input", code=exc.code)
    if isinstance(exc, EngineUnavailable):
        return Unavailable(exc.message, code=exc.code)
    if isinstance(exc, EngineError):
        return APIError(exc.message, code=exc.code)
    if isinstance(exc, ContainerNotFound):
        return NotFound(str(exc) or "Container not found or expired.", param="container_id")
    if isinstance(exc, MemoryLimitRefused):
        return InvalidRequest(f"The memory_limit cannot be granted: {exc}.", param="memory_limit")
    if isinstance(exc, PoolExhausted):
        return Busy(
            f"Every code-interpreter sandbox is busy running code ({exc}); retry later or delete a container.",
            code="pool_exhausted",
        )
    if isinstance(exc, InterpreterError):
        return Unavailable(f"The code-interpreter sandbox failed: {exc}")
    return APIError("The server had an error processing the request.")


def failure_code(error: APIError) -> str:
    """`error.code` of a `response.failed` event: one of the fixed codes the SDK's `ResponseError` allows."""
    if isinstance(error, Busy):
        return "rate_limit_exceeded"
    if 400 <= error.status < 500:
        return "invalid_prompt"
    return "server_error"

"""The API error tree: each class carries its OpenAI error `type`, `code`, `param` and HTTP status.

    APIError (500 server_error)
    ├── InvalidRequest (400 invalid_request_error)  bad field, unsupported value
    │   └── NotFound (404)                            unknown response / container / file id
    ├── Unauthorized (401 authentication_error)
    ├── Forbidden (403 invalid_request_error)         e.g. a request from another site's web page
    ├── Conflict (409 invalid_request_error)          e.g. cancelling a response that is not background
    ├── PayloadTooLarge (413 invalid_request_error)   a body past --max-request-bytes / --max-upload-bytes
    ├── UnsupportedMediaType (415 invalid_request_error)  a JSON body not sent as application/json
    ├── Busy (429 rate_limit_error)                   every sandbox is running code; the server is at capacity
    │                                                 (with `Retry-After`): retry later
    └── Unavailable (503 server_error)                engine or sandbox not ready / could not start

A leaf: it imports nothing of ours. `vllm_responses.errors` maps the lower layers' domain errors onto it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "APIError",
    "Busy",
    "Conflict",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "error_body",
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


class Forbidden(APIError):
    status = 403
    type = "invalid_request_error"
    default_code = "forbidden"


class Conflict(APIError):
    status = 409
    type = "invalid_request_error"
    default_code = "conflict"


class PayloadTooLarge(APIError):
    status = 413
    type = "invalid_request_error"
    default_code = "request_too_large"


class UnsupportedMediaType(APIError):
    status = 415
    type = "invalid_request_error"
    default_code = "unsupported_media_type"


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

"""Logging: text or JSON lines (`--log-format`), and the request id (`x-request-id`) every record carries.

`RequestIdMiddleware` takes the id from the request's `x-request-id` header (1-128 characters of
`A-Z a-z 0-9 . _ : / + = @ -`) or makes one (`req_<32 hex>`), echoes it in the response's `x-request-id`
header (errors and SSE streams too) and keeps it, with the time the request arrived, in context variables
for the request's handling and every task it starts (a response's task included). `RequestIdFilter` stamps
it on each record where it is made; `JSONFormatter` writes it into each line, `TextFormatter` appends it as
`[request_id=...]`.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import logging
import logging.config
import os
import re
import tempfile
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "RESPONSE_LOGGER",
    "JSONFormatter",
    "RequestIdFilter",
    "RequestIdMiddleware",
    "TextFormatter",
    "configure_logging",
    "current_request_id",
    "request_started_at",
]

REQUEST_ID_HEADER = b"x-request-id"
_VALID_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
_request_started: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "request_started", default=None
)
# The logger of the one line per finished response (`meter.py`); its records carry a `response` dict.
RESPONSE_LOGGER = "vllm_responses.responses"
# LogRecord attributes that are not `extra` fields (and uvicorn's `color_message`, the message with ANSI colours).
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


def current_request_id() -> str | None:
    """The id of the request being handled (also inside the tasks it started), else None."""
    return _request_id.get()


def request_started_at() -> float | None:
    """`time.monotonic()` when the request being handled arrived (HTTP only), else None."""
    return _request_started.get()


def request_id_from(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's `x-request-id` when it is well-formed, else a new one."""
    for name, value in headers:
        if name.lower() == REQUEST_ID_HEADER:
            given = value.decode("latin-1")
            if _VALID_ID.fullmatch(given):
                return given
            break
    return "req_" + uuid.uuid4().hex


class RequestIdMiddleware:
    """Plain ASGI middleware (outermost, so 500s carry the header too): the request id in and out."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        rid = request_id_from(scope["headers"])
        id_token = _request_id.set(rid)
        started_token = _request_started.set(time.monotonic() if scope["type"] == "http" else None)
        header = (REQUEST_ID_HEADER, rid.encode("latin-1"))

        async def send_with_id(message: Message) -> None:
            if message["type"] in ("http.response.start", "websocket.accept"):
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _request_started.reset(started_token)
            _request_id.reset(id_token)


class RequestIdFilter(logging.Filter):
    """Stamps `record.request_id` (the request being handled where the record is made, else None)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JSONFormatter(logging.Formatter):
    """One JSON object per record: `ts` (ISO 8601, UTC), `level`, `logger`, `message`, `request_id` (when
    there is one), `exc_info` (the traceback text, when there is one), and any `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and value is not None:
                line[key] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message`, then ` [request_id=...]` inside a request."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        rid = getattr(record, "request_id", None)
        return f"{text} [request_id={rid}]" if rid is not None else text


def _dict_config(fmt: str, level: str) -> dict[str, Any]:
    """The `logging.config.dictConfig` of our process (and, in JSON mode, of vLLM's engine-core process)."""
    formatter = JSONFormatter if fmt == "json" else TextFormatter
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "main",
        "filters": ["request_id"],
        "stream": "ext://sys.stderr",
    }
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": f"{__name__}.RequestIdFilter"}},
        "formatters": {"main": {"()": f"{formatter.__module__}.{formatter.__qualname__}"}},
        "handlers": {"main": handler},
        "root": {"handlers": ["main"], "level": level.upper()},
    }
    if fmt == "json":  # vLLM's and uvicorn's loggers write through ours, not their own handlers
        config["loggers"] = {
            name: {"handlers": [], "propagate": True} for name in ("vllm", "uvicorn", "uvicorn.access")
        }
    return config


def configure_logging(fmt: str, level: str) -> None:
    """Log through one handler on stderr in `fmt` ("text" or "json") at `level`. In JSON mode vLLM's engine
    core (a child process that configures its own logging when it imports vLLM) is pointed at the same
    configuration through `VLLM_LOGGING_CONFIG_PATH`, unless the user set that variable, and Python
    warnings become log records. What is written to stderr outside `logging` (torch's C++ warnings,
    progress bars while the model loads) stays as it is."""
    config = _dict_config(fmt, level)
    logging.config.dictConfig(config)
    logging.captureWarnings(fmt == "json")  # Python warnings as log records (logger `py.warnings`)
    if fmt == "json" and "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        child = {**config, "root": {**config["root"], "level": os.environ.get("VLLM_LOGGING_LEVEL", "INFO")}}
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="vr-logging-", delete=False) as f:
            json.dump(child, f)
        os.environ["VLLM_LOGGING_CONFIG_PATH"] = f.name
        atexit.register(os.unlink, f.name)

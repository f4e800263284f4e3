"""Request bodies bounded while they are read: a 413 as soon as a body is known to be too large, before the
rest of it is read (a `Content-Length` past the limit before reading anything)."""

from __future__ import annotations

import re

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vllm_responses.protocol.errors import PayloadTooLarge

__all__ = ["MULTIPART_SLACK", "UPLOAD_PATH", "BodyLimitMiddleware"]

# The container file upload (multipart): bounded by --max-upload-bytes instead of --max-request-bytes.
UPLOAD_PATH = re.compile(r"/v1/containers/[^/]+/files/?")
# What multipart framing (boundaries, part headers, a few small fields) may add to the file it carries.
MULTIPART_SLACK = 64 * 1024


class BodyLimitMiddleware:
    """Plain ASGI middleware. An HTTP request whose `Content-Length` is past its limit is answered 413 at once,
    without reading the body; a longer body (chunked, or no length) raises `PayloadTooLarge` from `receive`
    when the byte that passes the limit arrives, which the app answers with the 413. Either answer carries
    `Connection: close`: the rest of the body is never read, so the connection cannot be reused.

    Parameters
    ----------
    app: the wrapped app.
    max_request_bytes: the bound on every body but a container file upload's.
    max_upload_bytes: the bound on the file of a container file upload (its body may be `MULTIPART_SLACK`
        longer; the route checks the file itself against `max_upload_bytes`).
    """

    def __init__(self, app: ASGIApp, max_request_bytes: int, max_upload_bytes: int) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.max_upload_bytes = max_upload_bytes

    def _refusal(self, upload: bool) -> PayloadTooLarge:
        if upload:
            return PayloadTooLarge(
                f"The upload is larger than {_size(self.max_upload_bytes)}, this server's limit on a "
                "container file (--max-upload-bytes).",
                param="file",
                code="file_too_large",
            )
        return PayloadTooLarge(
            f"The request body is larger than {_size(self.max_request_bytes)}, this server's limit "
            "(--max-request-bytes).",
            param="body",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = UPLOAD_PATH.fullmatch(scope["path"]) is not None
        limit = self.max_upload_bytes + MULTIPART_SLACK if upload else self.max_request_bytes
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            err = self._refusal(upload)
            response = JSONResponse(err.body(), status_code=err.status, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        received = 0
        refused = started = False

        async def bounded_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if started:  # too late for a 413: the app reads on as if the client had left
                        return {"type": "http.disconnect"}
                    raise self._refusal(upload)
            return message

        async def closing_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if refused:
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, bounded_receive, closing_send)


def _size(n: int) -> str:
    """A byte count as people write it: `8 MiB`, `512 KiB`, `1000 bytes`."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"

"""The app's plain ASGI middleware: the Host and Origin checks, the API-key check, the shutdown gate and
request bodies bounded while they are read, with the refusal of a WebSocket upgrade that they share."""

from __future__ import annotations

import asyncio
import re

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from vllm_responses.api.auth import KeyRing, set_principal
from vllm_responses.api.failures import AuthFailures
from vllm_responses.api.hosts import HostPattern, host_allowed, origin_allowed
from vllm_responses.protocol.errors import APIError, Forbidden, InvalidRequest, PayloadTooLarge, Unauthorized
from vllm_responses.service.lifecycle import Lifecycle

__all__ = [
    "CLOSE_POLICY",
    "MULTIPART_SLACK",
    "UPLOAD_PATH",
    "DRAIN_LEAST",
    "DRAIN_S",
    "PROBE_PATHS",
    "APIKeyMiddleware",
    "BodyLimitMiddleware",
    "HostCheckMiddleware",
    "OriginCheckMiddleware",
    "ShutdownGate",
    "deny_websocket",
]

# The close code (RFC 6455) of a WebSocket refused before its upgrade (an HTTP 403 where no denial response).
CLOSE_POLICY = 1008
# The multipart uploads (a container file, a file, an upload's part): bounded by --max-upload-bytes instead of
# --max-request-bytes.
UPLOAD_PATH = re.compile(r"/v1/containers/[^/]+/files/?|/v1/files/?|/v1/uploads/[^/]+/parts/?")
# What multipart framing (boundaries, part headers, a few small fields) may add to the file it carries.
MULTIPART_SLACK = 64 * 1024
# What orchestrators probe at the pod's own address: answered whatever the Host (they reveal nothing more).
PROBE_PATHS = frozenset({"/health", "/ready"})
# A body past its limit is read on and dropped for at most this long before its 413 (see `_drain`).
DRAIN_S = 5.0
# ... and at most this many bytes in all (or 4 times the limit, if more).
DRAIN_LEAST = 64 * 1024 * 1024


async def deny_websocket(scope: Scope, receive: Receive, send: Send, err: APIError) -> None:
    """Refuse an upgrade before accepting it: the HTTP error response where the server supports denial
    responses (uvicorn does), else close 1008 (which the server answers with a 403)."""
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(
            JSONResponse(err.body(), status_code=err.status, headers=err.headers)
        )
    else:
        await websocket.close(CLOSE_POLICY)


async def _refuse(scope: Scope, receive: Receive, send: Send, err: APIError) -> None:
    """`err` as the answer: its HTTP error response, or the refusal of a WebSocket upgrade."""
    if scope["type"] == "websocket":
        await deny_websocket(scope, receive, send, err)
    else:
        await JSONResponse(err.body(), status_code=err.status, headers=err.headers)(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    """The request's header `name` (lower case), the first if it is given twice."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class HostCheckMiddleware:
    """A request (HTTP, WebSocket) whose `Host` is not one of `--allowed-hosts` gets a 400, but on the probe
    paths: a web page whose name an attacker points at this server (DNS rebinding) cannot reach it by that
    name, so the browser's same-origin rule keeps holding.

    Parameters
    ----------
    app: the wrapped app.
    allowed: `hosts.allowed_hosts(config)` (None: any).
    """

    def __init__(self, app: ASGIApp, allowed: frozenset[HostPattern] | None) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"] not in PROBE_PATHS:
            host = _header(scope, b"host") or ""
            if not host_allowed(host, self.allowed):
                err = InvalidRequest(
                    f"The Host {host!r} is not served here: add it to --allowed-hosts "
                    "(VLLM_RESPONSES_ALLOWED_HOSTS) to serve it.",
                    param=None,
                    code="host_not_allowed",
                )
                await _refuse(scope, receive, send, err)
                return
        await self.app(scope, receive, send)


class OriginCheckMiddleware:
    """A request (HTTP, WebSocket) with an `Origin` that is neither the server's own (its `Host`) nor one of
    `allowed` (`--allowed-origins`) gets a 403 (a WebSocket upgrade is refused before it is accepted): another
    site's web page cannot post to the server (CSRF) nor open a WebSocket to it. Clients that are not
    browsers send no `Origin` and pass."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            origin = _header(scope, b"origin")
            if origin is not None and not origin_allowed(origin, _header(scope, b"host") or "", self.allowed):
                err = Forbidden(
                    f"Requests from the web origin {origin!r} are refused: add it to --allowed-origins "
                    "(VLLM_RESPONSES_ALLOWED_ORIGINS) to allow it.",
                    code="origin_not_allowed",
                )
                await _refuse(scope, receive, send, err)
                return
        await self.app(scope, receive, send)


class APIKeyMiddleware:
    """`/v1/*` needs `Authorization: Bearer <key>` of a known key when keys are configured (HTTP, and
    WebSocket upgrades, refused before they are accepted); the key's `Principal` (its project) goes in the
    scope for the routes (`auth.principal_of`). With no key configured every request is project `default`.
    A failed check counts against the client's address (`failures`): past its limit, a 429 before any key
    is checked."""

    def __init__(self, app: ASGIApp, keys: KeyRing, failures: AuthFailures | None = None) -> None:
        self.app = app
        self.keys = keys
        self.failures = failures or AuthFailures(0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"].startswith("/v1/"):
            client = scope.get("client")
            address = str(client[0]) if client else ""
            if (throttled := self.failures.refusal(address)) is not None:
                await _refuse(scope, receive, send, throttled)
                return
            given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            principal = self.keys.resolve(given)
            if principal is None:
                self.failures.failed(address)
                err = Unauthorized("Incorrect or missing API key: send 'Authorization: Bearer <key>'.")
                await _refuse(scope, receive, send, err)
                return
            set_principal(scope, principal)
        await self.app(scope, receive, send)


class ShutdownGate:
    """While the server is not serving, a new response (`POST /v1/responses`, `POST /v1/responses/compact`,
    a `/v1/responses` WebSocket) gets 503 in the OpenAI error shape."""

    PATHS = frozenset({"/v1/responses", "/v1/responses/compact"})

    def __init__(self, app: ASGIApp, lifecycle: Lifecycle) -> None:
        self.app = app
        self.lifecycle = lifecycle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"] in self.PATHS:
            if scope["type"] == "websocket" or scope.get("method") == "POST":
                err = self.lifecycle.refusal()
                if err is not None:
                    await _refuse(scope, receive, send, err)
                    return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """An HTTP request whose `Content-Length` is past its limit is answered 413 before the app sees it; a
    longer body (chunked, or no length) raises `PayloadTooLarge` from `receive` when the byte that passes the
    limit arrives, which the app answers with the 413. Either way the rest of the body is first read and
    dropped (`_drain`: bounded in bytes and time), so that a client still sending it reads the 413 rather
    than a reset; the answer carries `Connection: close`.

    Parameters
    ----------
    app: the wrapped app.
    max_request_bytes: the bound on every body but a multipart upload's (`UPLOAD_PATH`).
    max_upload_bytes: the bound on the file of a multipart upload (its body may be `MULTIPART_SLACK` longer;
        the route checks the file itself against `max_upload_bytes`).
    """

    def __init__(self, app: ASGIApp, max_request_bytes: int, max_upload_bytes: int) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.max_upload_bytes = max_upload_bytes

    def _refusal(self, upload: str | None) -> PayloadTooLarge:
        """The 413 for a body past its bound; `upload`: the multipart field of an upload's file."""
        if upload:
            return PayloadTooLarge(
                f"The upload is larger than {_size(self.max_upload_bytes)}, this server's limit on an "
                "uploaded file (--max-upload-bytes).",
                param=upload,
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
        path = scope["path"]
        upload = (
            ("data" if path.endswith(("/parts", "/parts/")) else "file")
            if UPLOAD_PATH.fullmatch(path)
            else None
        )
        limit = self.max_upload_bytes + MULTIPART_SLACK if upload else self.max_request_bytes
        length = dict(scope["headers"]).get(b"content-length", b"")
        bound = max(4 * limit, DRAIN_LEAST)
        if length.isdigit() and int(length) > limit:
            if int(length) <= bound:  # else the client cannot read the answer anyway: no use reading on
                await _drain(receive, bound)
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
                    if message.get("more_body", False):
                        await _drain(receive, bound - received)
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


async def _drain(receive: Receive, most: int) -> None:
    """Read and drop the rest of a request's body: until its end, the client's leaving, `most` more bytes
    or `DRAIN_S` seconds, whichever comes first."""
    read = 0
    try:
        async with asyncio.timeout(DRAIN_S):
            while read <= most:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                read += len(message.get("body", b""))
    except TimeoutError:
        return


def _size(n: int) -> str:
    """A byte count as people write it: `8 MiB`, `512 KiB`, `1000 bytes`."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"

"""The shared service's guard: a bearer token checked on every request, and the bind rule it comes with.

`TokenGuard` is a plain ASGI middleware: a request without `Authorization: Bearer <token>` (compared in
constant time) gets a 401 before it reaches a route. Every answer carries `x-sandbox-boot`, an id drawn when
the service starts, so a client can tell that the service restarted (and its containers are gone).
`check_bind` refuses a non-loopback address without a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BOOT_HEADER", "TOKEN_ENV", "TokenGuard", "check_bind", "is_loopback"]

BOOT_HEADER = "x-sandbox-boot"
TOKEN_ENV = "VR_INTERPRETER_TOKEN"


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine ("localhost", 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, token: str | None) -> str | None:
    """Why the service must not start on `host` with this token (None: it may)."""
    if token or is_loopback(host):
        return None
    return (
        f"refusing to serve the code interpreter on {host} without a token: anyone who can reach it could "
        f"run code. Pass --token (or set {TOKEN_ENV}) and give the gateways the same value "
        "(--code-interpreter-token), or listen on 127.0.0.1."
    )


class TokenGuard:
    """Answers 401 unless the request bears `token` (no check when `token` is None); stamps the boot id."""

    def __init__(self, app: ASGIApp, *, token: str | None, boot_id: str) -> None:
        self.app = app
        self._token = f"Bearer {token}".encode() if token else None
        self._boot = boot_id.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (BOOT_HEADER.encode(), self._boot)]
            await send(message)

        if self._token is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._token):
                await _unauthorized(stamped)
                return
        await self.app(scope, receive, stamped)


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {
            "error": {
                "type": "unauthorized",
                "message": "missing or wrong bearer token for the sandbox service",
            }
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b"Bearer"),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})

"""Per-key rate limits (`--rate-limit-rpm`, `--rate-limit-tpm`, or a key's own in the keys file): requests and
tokens over a sliding minute, a 429 past them, and OpenAI's `x-ratelimit-*` headers on every `/v1` answer.

A request counts when it arrives (an HTTP request or a WebSocket upgrade to `/v1`); tokens count when a
response ends, from its usage (input + output), so a key is refused once its last minute of finished
responses reached its limit (the response that crosses it runs to its end). Counts live in this process.
"""

from __future__ import annotations

import math
import time
from collections import deque

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vllm_responses.api.auth import Principal, principal_of
from vllm_responses.api.middleware import deny_websocket
from vllm_responses.protocol.errors import Busy
from vllm_responses.runs.run import Run

__all__ = ["Meter", "RateLimitMiddleware", "RateLimits", "charge", "duration", "meter_of"]

WINDOW_S = 60.0


def duration(seconds: float) -> str:
    """A wait as OpenAI writes it in `x-ratelimit-reset-*`: `250ms`, `20s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, int(seconds * 1000))}ms"
    minutes, secs = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class Meter:
    """One key's last minute: when its requests came and the tokens of its responses that ended."""

    def __init__(self, rpm: int, tpm: int) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.requests: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()

    @property
    def limited(self) -> bool:
        return bool(self.rpm or self.tpm)

    def _trim(self, now: float) -> None:
        while self.requests and self.requests[0] <= now - WINDOW_S:
            self.requests.popleft()
        while self.tokens and self.tokens[0][0] <= now - WINDOW_S:
            self.tokens.popleft()

    def _used_tokens(self) -> int:
        return sum(n for _t, n in self.tokens)

    def admit(self, now: float) -> Busy | None:
        """Count a request now; the 429 to answer instead when the key is at a limit (then it is not counted)."""
        self._trim(now)
        if self.rpm and len(self.requests) >= self.rpm:
            wait = self.requests[0] + WINDOW_S - now
            used = len(self.requests)
            what = f"requests per min (RPM): Limit {self.rpm}, Used {used}, Requested 1"
            return self._refusal(what, wait, now)
        used_tokens = self._used_tokens()
        if self.tpm and used_tokens >= self.tpm:
            wait = self._tokens_free_at(used_tokens - self.tpm + 1) - now
            return self._refusal(f"tokens per min (TPM): Limit {self.tpm}, Used {used_tokens}", wait, now)
        self.requests.append(now)
        return None

    def _tokens_free_at(self, needed: int) -> float:
        """When `needed` of the counted tokens have left the window."""
        freed = 0
        for at, n in self.tokens:
            freed += n
            if freed >= needed:
                return at + WINDOW_S
        return time.monotonic()

    def _refusal(self, what: str, wait: float, now: float) -> Busy:
        retry = max(1, math.ceil(wait))
        headers = {"retry-after": str(retry), **dict(self.headers(now))}
        return Busy(f"Rate limit reached for {what}. Please try again in {duration(wait)}.", headers=headers)

    def spend(self, tokens: int, now: float | None = None) -> None:
        """Count the tokens of a response that ended."""
        if self.tpm and tokens > 0:
            self.tokens.append((time.monotonic() if now is None else now, tokens))

    def headers(self, now: float) -> list[tuple[str, str]]:
        """OpenAI's `x-ratelimit-*` headers for the limits that are set."""
        self._trim(now)
        out: list[tuple[str, str]] = []
        if self.rpm:
            reset = self.requests[0] + WINDOW_S - now if self.requests else 0.0
            out += [
                ("x-ratelimit-limit-requests", str(self.rpm)),
                ("x-ratelimit-remaining-requests", str(max(0, self.rpm - len(self.requests)))),
                ("x-ratelimit-reset-requests", duration(reset)),
            ]
        if self.tpm:
            reset = self.tokens[-1][0] + WINDOW_S - now if self.tokens else 0.0
            out += [
                ("x-ratelimit-limit-tokens", str(self.tpm)),
                ("x-ratelimit-remaining-tokens", str(max(0, self.tpm - self._used_tokens()))),
                ("x-ratelimit-reset-tokens", duration(reset)),
            ]
        return out


class RateLimits:
    """The meters of the keys seen, by `Principal.key_id`."""

    def __init__(self) -> None:
        self.meters: dict[str, Meter] = {}

    def meter(self, principal: Principal) -> Meter:
        found = self.meters.get(principal.key_id)
        if found is None:
            found = self.meters[principal.key_id] = Meter(principal.rpm, principal.tpm)
        return found


class RateLimitMiddleware:
    """Inside the key check: a `/v1` request past its key's limit gets a 429 `rate_limit_exceeded` with
    `retry-after`; every other `/v1` HTTP answer carries the key's `x-ratelimit-*` headers. The key's meter
    goes in the scope for the routes that count tokens (`charge`)."""

    def __init__(self, app: ASGIApp, limits: RateLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        meter = self.limits.meter(principal_of(HTTPConnection(scope)))
        if not meter.limited:
            await self.app(scope, receive, send)
            return
        err = meter.admit(time.monotonic())
        if err is not None:
            if scope["type"] == "websocket":
                await deny_websocket(scope, receive, send, err)
            else:
                await JSONResponse(err.body(), status_code=err.status, headers=err.headers)(
                    scope, receive, send
                )
            return
        scope.setdefault("state", {})["meter"] = meter

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(k.encode(), v.encode()) for k, v in meter.headers(time.monotonic())]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def meter_of(connection: HTTPConnection) -> Meter | None:
    """The meter of the request's key (`RateLimitMiddleware` put it in the scope); None when it has no limits."""
    meter = connection.scope.get("state", {}).get("meter")
    return meter if isinstance(meter, Meter) else None


def charge(connection: HTTPConnection, run: Run) -> None:
    """Count a response's tokens (input + output) against its key's meter when its run ends."""
    meter = meter_of(connection)
    if meter is None or not meter.tpm or run.task is None:
        return

    def spend(_task: object) -> None:
        usage = run.builder.usage
        meter.spend(usage.input_tokens + usage.output_tokens)

    run.task.add_done_callback(spend)

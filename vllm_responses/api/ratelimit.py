"""Per-key rate limits (`--rate-limit-rpm`, `--rate-limit-tpm`, or a key's own in the keys file): requests and
tokens over a sliding minute, a 429 past them, and OpenAI's `x-ratelimit-*` headers on every `/v1` answer.

A request counts when it arrives (an HTTP request or a WebSocket upgrade to `/v1`). Tokens are reserved when a
response is admitted (`Meter.reserve`: its prompt's tokens plus its output budget, `max_output_tokens` or what
the context leaves), so responses created at once cannot all pass a limit that none of them has reached yet;
when the response ends the reservation is settled to its real usage (input + output), which then counts for a
minute. A reservation larger than the whole limit is cut to the limit: it fits only when nothing else of the
key's is counted, and is charged its real usage at its end. Counts live in this process.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vllm_responses.api.auth import Principal, principal_of
from vllm_responses.api.middleware import deny_websocket
from vllm_responses.protocol.errors import Busy

__all__ = ["Meter", "RateLimitMiddleware", "RateLimits", "duration", "meter_of"]

WINDOW_S = 60.0
Clock = Callable[[], float]


def duration(seconds: float) -> str:
    """A wait as OpenAI writes it in `x-ratelimit-reset-*`: `250ms`, `20s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, int(seconds * 1000))}ms"
    minutes, secs = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class Meter:
    """One key's last minute: when its requests came, the tokens of its responses that ended (at their end),
    and the reservations of those still running."""

    def __init__(self, rpm: int, tpm: int, clock: Clock = time.monotonic) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.clock = clock
        self.requests: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()
        self.held = 0  # tokens reserved by responses still running

    @property
    def limited(self) -> bool:
        return bool(self.rpm or self.tpm)

    def _trim(self, now: float) -> None:
        while self.requests and self.requests[0] <= now - WINDOW_S:
            self.requests.popleft()
        while self.tokens and self.tokens[0][0] <= now - WINDOW_S:
            self.tokens.popleft()

    def _used_tokens(self) -> int:
        return self.held + sum(n for _t, n in self.tokens)

    def admit(self) -> Busy | None:
        """Count a request now; the 429 to answer instead when the key is at its requests limit (then it is
        not counted)."""
        now = self.clock()
        self._trim(now)
        if self.rpm and len(self.requests) >= self.rpm:
            wait = self.requests[0] + WINDOW_S - now
            used = len(self.requests)
            what = f"requests per min (RPM): Limit {self.rpm}, Used {used}, Requested 1"
            return self._refusal(what, wait, now)
        self.requests.append(now)
        return None

    def reserve(self, tokens: int) -> Callable[[int], None]:
        """Hold `tokens` (at most the whole limit) for a response being admitted, or raise the 429 `Busy`
        when they do not fit in what the key has left this minute. The function returned settles the hold
        to the tokens really used, once, when the response ends."""
        if not self.tpm:
            return lambda _used: None
        now = self.clock()
        self._trim(now)
        wanted = min(max(tokens, 1), self.tpm)
        used = self._used_tokens()
        if used + wanted > self.tpm:
            wait = self._tokens_free_in(used + wanted - self.tpm, now)
            what = f"tokens per min (TPM): Limit {self.tpm}, Used {used}, Requested {wanted}"
            raise self._refusal(what, wait, now)
        self.held += wanted
        settled = False

        def settle(used_tokens: int) -> None:
            nonlocal settled
            if not settled:
                settled = True
                self.held -= wanted
                self.spend(used_tokens)

        return settle

    def _tokens_free_in(self, needed: int, now: float) -> float:
        """Seconds until `needed` of the counted tokens have left the window (1 s when only the end of
        running responses can free them)."""
        freed = 0
        for at, n in self.tokens:
            freed += n
            if freed >= needed:
                return at + WINDOW_S - now
        return 1.0

    def _refusal(self, what: str, wait: float, now: float) -> Busy:
        retry = max(1, math.ceil(wait))
        headers = {"retry-after": str(retry), **dict(self.headers(now))}
        return Busy(f"Rate limit reached for {what}. Please try again in {duration(wait)}.", headers=headers)

    def spend(self, tokens: int) -> None:
        """Count tokens used now (a response's at its end, a compaction's)."""
        if self.tpm and tokens > 0:
            self.tokens.append((self.clock(), tokens))

    def headers(self, now: float | None = None) -> list[tuple[str, str]]:
        """OpenAI's `x-ratelimit-*` headers for the limits that are set."""
        now = self.clock() if now is None else now
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
    """The meters of the keys seen, by `Principal.key_id`, on one `clock` (tests give their own)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.meters: dict[str, Meter] = {}
        self.clock = clock

    def meter(self, principal: Principal) -> Meter:
        """The key's meter, with the key's limits as they are now (a reloaded keys file may change them)."""
        found = self.meters.get(principal.key_id)
        if found is None:
            found = self.meters[principal.key_id] = Meter(principal.rpm, principal.tpm, self._now)
        found.rpm, found.tpm = principal.rpm, principal.tpm
        return found

    def _now(self) -> float:
        return self.clock()


class RateLimitMiddleware:
    """Inside the key check: a `/v1` request past its key's requests limit gets a 429 `rate_limit_exceeded`
    with `retry-after`; every other `/v1` HTTP answer carries the key's `x-ratelimit-*` headers. The key's
    meter goes in the scope for the routes that reserve tokens (`meter_of`)."""

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
        err = meter.admit()
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
                given = list(message.get("headers", []))
                if not any(k.lower().startswith(b"x-ratelimit-") for k, _v in given):  # a 429 has its own
                    given += [(k.encode(), v.encode()) for k, v in meter.headers()]
                message = {**message, "headers": given}
            await send(message)

        await self.app(scope, receive, with_headers)


def meter_of(connection: HTTPConnection) -> Meter | None:
    """The meter of the request's key (`RateLimitMiddleware` put it in the scope); None when it has no limits."""
    meter = connection.scope.get("state", {}).get("meter")
    return meter if isinstance(meter, Meter) else None

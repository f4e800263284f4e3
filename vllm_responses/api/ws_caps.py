"""Caps on the WebSocket connections open at once: in all, and per API key (per client address without one)."""

from __future__ import annotations

from collections import Counter

from starlette.types import Scope

from vllm_responses.api.auth import ANONYMOUS, Principal
from vllm_responses.protocol.errors import Busy

__all__ = ["WebSocketCaps"]


class WebSocketCaps:
    """Counts the open `/v1/responses` WebSocket connections; `take` refuses one past a cap (a `Busy`, 429,
    which the route sends as the refusal of the upgrade, before accepting it), `give_back` frees its place.

    Parameters
    ----------
    total: connections open at once, all clients together (`--max-websockets`).
    per_key: connections open at once per caller (`--max-websockets-per-key`): per API key the key check
        accepted, else (no key configured) per client address: an unchecked bearer value would let a caller
        pick a fresh one per connection.
    """

    def __init__(self, total: int, per_key: int) -> None:
        self.total = total
        self.per_key = per_key
        self.open: Counter[str] = Counter()

    def caller(self, scope: Scope) -> str:
        """Whom a connection counts against: `key:<the key's SHA-256>` (from the principal the key check put
        in the scope; the key itself is not kept) or `addr:<client host>`."""
        principal = scope.get("state", {}).get("principal")
        if isinstance(principal, Principal) and principal.key_id != ANONYMOUS:
            return "key:" + principal.key_id
        client = scope.get("client")
        return "addr:" + (str(client[0]) if client else "")

    def take(self, scope: Scope) -> str:
        """A place for the connection of `scope` (its caller, to give back), or a `Busy` past a cap."""
        caller = self.caller(scope)
        if self.open.total() >= self.total:
            raise self._refusal(
                f"{self.total} WebSocket connections are open on this server (--max-websockets)"
            )
        if self.open[caller] >= self.per_key:
            who = "API key" if caller.startswith("key:") else "client address"
            raise self._refusal(
                f"{self.per_key} WebSocket connections are open for this {who} (--max-websockets-per-key)"
            )
        self.open[caller] += 1
        return caller

    def give_back(self, caller: str) -> None:
        """Free the place `take` gave `caller`."""
        self.open[caller] -= 1
        if self.open[caller] <= 0:
            del self.open[caller]

    @staticmethod
    def _refusal(why: str) -> Busy:
        return Busy(
            f"{why}; close one, or retry later.",
            code="websocket_connection_limit_reached",
        )

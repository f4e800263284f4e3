"""Failed API-key checks counted per client address (`--auth-failures-per-minute`): a token bucket whose
emptiness turns the address's next `/v1` requests into 429s, so keys cannot be guessed at full speed."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from vllm_responses.protocol.errors import Busy

__all__ = ["MAX_ADDRESSES", "AuthFailures"]

# Addresses tracked at most: past it those whose bucket is full again go first, then the longest untouched.
MAX_ADDRESSES = 10_000


class AuthFailures:
    """Per client address, a bucket of `per_minute` failures refilled at `per_minute` a minute: each failed
    key check takes one; while the bucket is empty every `/v1` request from the address is refused (a 429
    with `Retry-After`) before its key is checked, valid or not (else a guess would still tell a valid key
    apart). Other addresses are not affected. `per_minute` 0: never refused.

    Parameters
    ----------
    per_minute: the bucket's size and refill rate.
    clock: seconds, monotonic (tests give their own).
    """

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens left, when counted)

    def _left(self, address: str, now: float) -> float:
        tokens, at = self.buckets.get(address, (float(self.per_minute), now))
        return min(float(self.per_minute), tokens + (now - at) * self.per_minute / 60.0)

    def refusal(self, address: str) -> Busy | None:
        """The 429 for a request from `address` while its bucket is empty; None when it may try a key."""
        if not self.per_minute or address not in self.buckets:
            return None
        left = self._left(address, self.clock())
        if left >= 1:
            return None
        wait = max(1, math.ceil((1 - left) * 60.0 / self.per_minute))
        return Busy(
            f"Too many requests with an incorrect API key from this address. Please try again in {wait}s.",
            headers={"retry-after": str(wait)},
        )

    def failed(self, address: str) -> None:
        """Count a failed key check from `address`."""
        if not self.per_minute:
            return
        now = self.clock()
        left = self._left(address, now)
        self.buckets.pop(address, None)
        self.buckets[address] = (max(0.0, left - 1), now)  # last: the most recently touched
        if len(self.buckets) > MAX_ADDRESSES:
            self._prune(now)

    def _prune(self, now: float) -> None:
        """Forget the addresses whose bucket is full again, then the longest untouched past `MAX_ADDRESSES`."""
        for address in [a for a in self.buckets if self._left(a, now) >= self.per_minute]:
            del self.buckets[address]
        while len(self.buckets) > MAX_ADDRESSES:
            del self.buckets[next(iter(self.buckets))]

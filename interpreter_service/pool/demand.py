"""`Demand`: recent takes of warm workers, and how many spare workers they call for."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

__all__ = ["Demand", "WINDOW_STARTS"]

WINDOW_STARTS = 10  # the shortest window, in start times


class Demand:
    """Remembers when warm workers were taken over the last `window_s` seconds, and how long a start takes
    (a moving average of the starts seen, `start_s` until the first one).

    `peak()` is the most takes that fell within any one start time in the window: the workers a repeat of
    the recent peak would need at once, before a start begun at its outset could finish. A steady rate of
    r takes a second gives about r × start time; a burst of n at once gives n. The window is at least
    `WINDOW_STARTS` start times (on a loaded machine a burst and its refill outlast a fixed window). Once a
    window passes without takes the peak is 0 again (the pool falls back to its configured spares)."""

    def __init__(
        self, *, window_s: float = 120.0, start_s: float = 6.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if window_s <= 0 or start_s <= 0:
            raise ValueError("window_s and start_s must be > 0")
        self.window_s = window_s
        self.start_s = start_s
        self.clock = clock
        self._takes: collections.deque[float] = collections.deque(maxlen=4096)
        self._starts_seen = 0

    def note_take(self) -> None:
        """A warm worker was taken (or asked for) now."""
        self._takes.append(self.clock())

    def note_start(self, seconds: float) -> None:
        """A worker took `seconds` to start: folded into `start_s` (the first replaces the default)."""
        if seconds <= 0:
            return
        self.start_s = seconds if self._starts_seen == 0 else 0.7 * self.start_s + 0.3 * seconds
        self._starts_seen += 1

    @property
    def window(self) -> float:
        """Seconds takes are remembered: `window_s`, or `WINDOW_STARTS` start times when longer."""
        return max(self.window_s, WINDOW_STARTS * self.start_s)

    def _recent(self) -> list[float]:
        cutoff = self.clock() - self.window
        while self._takes and self._takes[0] < cutoff:
            self._takes.popleft()
        return list(self._takes)

    def peak(self) -> int:
        """The most takes within any `start_s`-long span of the window (0 when there were none)."""
        takes, best, lo = self._recent(), 0, 0
        for hi, t in enumerate(takes):
            while t - takes[lo] > self.start_s:
                lo += 1
            best = max(best, hi - lo + 1)
        return best

    def target(self, floor: int, ceiling: int) -> int:
        """Spare workers to keep: the recent peak, at least `floor` and at most `ceiling` (floor wins)."""
        return max(floor, min(self.peak(), ceiling))

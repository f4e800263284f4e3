"""The structured-output constraints vLLM's request checks have already passed, so that a later request with the
same constraint skips converting its grammar again."""

from __future__ import annotations

import collections
import hashlib
import threading
from collections.abc import Callable

from vllm import SamplingParams

__all__ = ["CheckedGrammars"]


class CheckedGrammars:
    """`verify(params, check)`: `check(params)` (vLLM's `SamplingParams.verify`), except that a constraint
    (`params.structured_outputs`) that passed it before, one of the last `kept`, is not checked again: the
    rest of `params` still is. What vLLM checks of a constraint depends on the constraint and on the engine's
    fixed configuration only, so one that passed always passes. Converting a forced call's regex costs vLLM a
    new thread per check (its compile timeout), and a code turn is checked twice before its stream opens, so
    the saving is on every burst's first events. Only passes are kept; safe across threads (long prompts are
    checked in a worker thread)."""

    def __init__(self, kept: int = 256) -> None:
        self._kept = kept
        self._passed: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    def verify(self, params: SamplingParams, check: Callable[[SamplingParams], None]) -> None:
        constraint = params.structured_outputs
        if constraint is None:
            check(params)
            return
        # every field, before `check` picks a backend into it; a digest, as a schema can be long
        key = hashlib.blake2b(repr(constraint).encode(), digest_size=16).digest()
        with self._lock:
            known = key in self._passed
            if known:
                self._passed.move_to_end(key)
        if not known:
            check(params)
            self._keep(key)
            return
        params.structured_outputs = None  # the other checks only
        try:
            check(params)
        finally:
            params.structured_outputs = constraint

    def _keep(self, key: bytes) -> None:
        with self._lock:
            self._passed[key] = None
            while len(self._passed) > self._kept:
                self._passed.popitem(last=False)

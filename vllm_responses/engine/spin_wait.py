"""A vLLM plugin: the engine's shared-memory queue readers spin for milliseconds, not a second, after a read."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

__all__ = ["ENV", "NAP_MS", "install", "spin_seconds"]

# Under vLLM's logger, whose configuration its engine and worker processes print with (pid and process name).
log = logging.getLogger("vllm.plugins.vllm_responses_spin_wait")

# How long a reader of vLLM's shared-memory queue (`MessageQueue`) busy-waits after a read, in ms; `vllm`
# leaves vLLM's own wait as it is (1 s of spinning, `SpinCondition.busy_loop_s`). Unset, the default applies
# on vLLM's CPU platform only (a GPU host has cores to spare, and its steps outlast a short spin). On CPU the
# engine's scheduler and its model worker are two processes joined by such queues, so while the engine steps
# each spins whenever the other works, taking a core from the server and the sandbox workers.
ENV = "VR_ENGINE_SPIN_MS"
DEFAULT_SPIN_MS = 5.0
# Past the spin, and until vLLM's own spin would have ended, the reader sleeps on the writer's notice socket
# this long at a time. Notices get lost: with no spin at all the engine can miss wake-ups for a minute at a
# time (likely the writer's socket, which keeps one message (SNDHWM 1), dropping one while its I/O thread lags;
# vLLM's long spin hides it). A write whose notice was lost is still read within a nap.
NAP_MS = 5
TESTED_VLLM = ("0.32.",)  # the versions whose `SpinCondition` this was read against


def spin_seconds(value: str | None) -> float | None:
    """The spin `ENV` asks for, in seconds (unset: the default), or None for vLLM's own wait (`vllm`)."""
    if value is None or not value.strip():
        return DEFAULT_SPIN_MS / 1000
    if value.strip().lower() == "vllm":
        return None
    try:
        ms = float(value)
    except ValueError:
        raise ValueError(f"{ENV} must be a number of milliseconds or 'vllm', not {value!r}") from None
    if not 0 <= ms <= 60_000:
        raise ValueError(f"{ENV} must be between 0 and 60000 ms, not {value!r}")
    return ms / 1000


def install() -> None:
    """The `vllm.general_plugins` entry point, run in each of vLLM's processes: replace
    `SpinCondition.wait` (once; on CPU unless `ENV` asks for a spin; vLLM versions other than the tested ones
    are left as they are)."""
    value = os.environ.get(ENV)
    try:
        spin = spin_seconds(value)
    except ValueError as e:
        log.warning("%s; vLLM's own wait is kept", e)
        return
    if spin is None:
        return
    import vllm
    from vllm.distributed.device_communicators import shm_broadcast
    from vllm.platforms import current_platform

    if not (value or "").strip() and not current_platform.is_cpu():
        return

    cls = shm_broadcast.SpinCondition
    if getattr(cls.wait, "_vr_spin", None) is not None:
        return
    if not vllm.__version__.startswith(TESTED_VLLM):
        log.info("vLLM %s is not one %s was tested with; its queue wait is kept", vllm.__version__, ENV)
        return
    wait = _short_spin_wait(spin, shm_broadcast)
    wait._vr_original = cls.wait
    setattr(cls, "wait", wait)  # noqa: B010 (a method replaced on purpose)
    log.info(
        "shared-memory queue readers spin %g ms after a read, then nap %d ms at a time (%s)",
        spin * 1000,
        NAP_MS,
        ENV,
    )


def _short_spin_wait(spin: float, shm: Any) -> Any:
    """`SpinCondition.wait` that spins `spin` s after the last read, naps `NAP_MS` at a time on the notice
    socket until vLLM's own spin would have ended, and past that waits as vLLM does."""
    sched_yield, noblock = shm.sched_yield, shm.zmq.NOBLOCK

    def wait(self: Any, timeout_ms: int | None = None) -> None:
        assert self.is_reader, "Only readers can wait"
        since = time.monotonic() - self.last_read
        if since <= spin:
            sched_yield()
            return
        if since <= self.busy_loop_s:
            timeout_ms = NAP_MS if timeout_ms is None else min(timeout_ms, NAP_MS)
        events = dict(self.poller.poll(timeout=timeout_ms))
        if self.read_cancel_socket not in events and self.local_notify_socket in events:
            self.local_notify_socket.recv(flags=noblock, copy=False)  # CONFLATE: one notice at most

    wait._vr_spin = spin  # type: ignore[attr-defined]
    return wait

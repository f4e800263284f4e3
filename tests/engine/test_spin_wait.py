"""The vLLM plugin that shortens the engine's busy wait (`engine/spin_wait.py`): registered, installed once,
and its wait on vLLM's real `SpinCondition` (real zmq sockets): a spin, then bounded naps, then vLLM's wait."""

from __future__ import annotations

import importlib.metadata
import threading
import time
from typing import Any

import pytest

from vllm_responses.engine import spin_wait


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> Any:
    """vLLM's `SpinCondition` with the plugin's wait (5 ms spin), restored afterwards."""
    from vllm.distributed.device_communicators import shm_broadcast

    # vLLM may have loaded the plugin in this process already (an engine made here): start from its own wait,
    # and give back whatever was there before.
    monkeypatch.setattr(shm_broadcast.SpinCondition, "wait", _original_wait())
    monkeypatch.setenv(spin_wait.ENV, "5")
    spin_wait.install()
    return shm_broadcast


def _original_wait() -> Any:
    """vLLM's own `wait`, even when the plugin already patched this process (vLLM loaded it here)."""
    from vllm.distributed.device_communicators import shm_broadcast

    wait = shm_broadcast.SpinCondition.wait
    return getattr(wait, "_vr_original", wait)


@pytest.fixture
def pair(patched: Any) -> Any:
    """A writer and a reader `SpinCondition` on one in-process notice socket."""
    import zmq

    ctx = zmq.Context()
    addr = f"inproc://vr-spin-{time.monotonic_ns()}"
    writer = patched.SpinCondition(is_reader=False, context=ctx, notify_address=addr)
    reader = patched.SpinCondition(is_reader=True, context=ctx, notify_address=addr)
    yield writer, reader
    reader.cancel()  # wakes a wait a failed test left sleeping
    for s in (reader.local_notify_socket, reader.read_cancel_socket, reader.write_cancel_socket):
        s.close(linger=0)
    writer.local_notify_socket.close(linger=0)
    ctx.term()


def test_the_plugin_is_registered_for_vllm() -> None:
    found = importlib.metadata.entry_points(group="vllm.general_plugins")
    assert [e.value for e in found if e.name == "vllm_responses_spin_wait"] == [
        "vllm_responses.engine.spin_wait:install"
    ]


def test_the_setting_reads_milliseconds_or_vllm() -> None:
    assert spin_wait.spin_seconds(None) == spin_wait.spin_seconds("") == 0.005
    assert spin_wait.spin_seconds("20") == 0.02 and spin_wait.spin_seconds("0") == 0.0
    assert spin_wait.spin_seconds(" VLLM ") is None
    for bad in ("fast", "-1", "61000"):
        with pytest.raises(ValueError, match=spin_wait.ENV):
            spin_wait.spin_seconds(bad)


def test_install_patches_once_and_leaves_vllm_s_wait_when_asked(
    patched: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    wait = patched.SpinCondition.wait
    assert wait._vr_spin == 0.005
    spin_wait.install()  # vLLM loads plugins in each process, maybe more than once
    assert patched.SpinCondition.wait is wait
    original = _original_wait()
    for value in ("vllm", "fast"):  # vLLM's own wait; a bad value keeps it too (with a warning)
        monkeypatch.setattr(patched.SpinCondition, "wait", original)
        monkeypatch.setenv(spin_wait.ENV, value)
        spin_wait.install()
        assert patched.SpinCondition.wait is original


def test_unset_it_applies_on_cpu_only(patched: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.platforms import current_platform

    original = _original_wait()
    monkeypatch.delenv(spin_wait.ENV)
    for cpu, applied in ((False, False), (True, True)):
        monkeypatch.setattr(patched.SpinCondition, "wait", original)
        monkeypatch.setattr(current_platform, "is_cpu", lambda cpu=cpu: cpu)
        spin_wait.install()
        assert (patched.SpinCondition.wait is not original) is applied, cpu
    monkeypatch.setattr(patched.SpinCondition, "wait", original)
    monkeypatch.setattr(current_platform, "is_cpu", lambda: False)
    monkeypatch.setenv(spin_wait.ENV, "5")  # asked for: on a GPU host too
    spin_wait.install()
    assert patched.SpinCondition.wait._vr_spin == 0.005


class Polls:
    """A stand-in poller: records each poll's timeout, finds nothing."""

    def __init__(self) -> None:
        self.timeouts: list[int | None] = []

    def poll(self, timeout: int | None = None) -> list[Any]:
        self.timeouts.append(timeout)
        return []


def test_a_reader_spins_then_naps_then_waits_as_vllm_does(pair: Any) -> None:
    _, reader = pair
    polls = Polls()
    reader.poller = polls
    reader.record_read()
    reader.wait()  # within the spin: no poll
    assert polls.timeouts == []
    reader.last_read = time.monotonic() - 0.05  # past the spin, within vLLM's 1 s spin: a nap
    reader.wait()
    reader.wait(timeout_ms=2)
    reader.wait(timeout_ms=60_000)
    assert polls.timeouts == [spin_wait.NAP_MS, 2, spin_wait.NAP_MS]
    reader.last_read = time.monotonic() - 2  # idle past vLLM's spin: its own wait on the socket
    reader.wait()
    reader.wait(timeout_ms=60_000)
    assert polls.timeouts[3:] == [None, 60_000]


def test_a_lost_notice_costs_a_nap_and_a_notice_wakes_an_idle_reader(pair: Any) -> None:
    """On real sockets: a reader waiting with no notice coming (as when the writer's socket dropped it)
    returns after a nap instead of sleeping; an idle reader, sleeping as vLLM's does, wakes on a notice."""
    writer, reader = pair
    reader.last_read = time.monotonic() - 0.05
    done = threading.Event()
    napper = threading.Thread(target=lambda: (reader.wait(), done.set()), daemon=True)
    napper.start()
    napper.join(timeout=10)
    assert done.is_set(), "the wait slept on although no notice came"
    reader.last_read = time.monotonic() - 2
    woke = threading.Event()
    sleeper = threading.Thread(target=lambda: (reader.wait(), woke.set()), daemon=True)
    sleeper.start()
    time.sleep(0.1)
    assert not woke.is_set()  # idle: sleeps until told
    writer.notify()
    sleeper.join(timeout=10)
    assert woke.is_set(), "a notice did not wake the idle reader"

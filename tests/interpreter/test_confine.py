"""The cgroup helpers on a folder tree standing in for the hierarchy (no kernel needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from interpreter_service.api import InterpreterError
from interpreter_service.process.confine import WorkerGroup, detect, sweep_stale


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_sweep_removes_the_groups_of_gone_servers_only(tmp_path: Path) -> None:
    gone = tmp_path / f"vr-sandbox-{_dead_pid()}-abc123"
    mine = tmp_path / f"vr-sandbox-{os.getpid()}-def456"
    other = tmp_path / "someone-else"
    for d in (gone / "w-1", gone / "w-2", mine / "w-3", other):
        d.mkdir(parents=True)
    sweep_stale(tmp_path)
    assert not gone.exists(), "the group of a server that is gone stays"
    assert (mine / "w-3").is_dir() and other.is_dir()


def test_a_kernel_oom_kill_is_read_from_v1_and_v2_files(tmp_path: Path) -> None:
    v1, v2, quiet = tmp_path / "v1", tmp_path / "v2", tmp_path / "quiet"
    for d in (v1, v2, quiet):
        d.mkdir()
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    (quiet / "memory.events").write_text("low 0\noom 0\noom_kill 0\n")
    assert WorkerGroup([v1], []).oom_killed() and WorkerGroup([tmp_path / "x", v2], []).oom_killed()
    assert not WorkerGroup([quiet], []).oom_killed()


def test_modes(tmp_path: Path) -> None:
    assert detect("none").name == "none"
    assert detect("auto", root=tmp_path).name == "none"  # no hierarchy there: the watchdog holds
    with pytest.raises(InterpreterError, match="no usable cgroup"):
        detect("cgroup", root=tmp_path)
    with pytest.raises(InterpreterError, match="unknown sandbox isolation mode"):
        detect("namespaces")

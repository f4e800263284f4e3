"""A worker's set-up before exec (`interpreter_service.process.spawn`): through `sh` + `setpriv` (vfork, no Python in
the child) and through the forked child's `child_setup` where those tools are missing, each checked on a real
child process: its cgroup files joined, exactly its environment, no core dumps, `no_new_privs`, and SIGKILL
when the parent dies. Real processes, no Pyodide: these run in the fast subset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interpreter_service.process import spawn as spawn_mod
from interpreter_service.process.spawn import spawn_setup

NEEDS_SETPRIV = pytest.mark.skipif(spawn_mod.setpriv_tool() is None, reason="no util-linux setpriv here")
PATHS = [pytest.param("setpriv", marks=NEEDS_SETPRIV), "preexec"]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "preexec":
        monkeypatch.setattr(spawn_mod, "setpriv_tool", lambda: None)
    return str(request.param)


def run(
    cmd: list[str], procs: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[int, str, str, int]:
    s = spawn_setup(None, procs, env)
    p = subprocess.Popen(
        [*s.prefix, *cmd], env=env, preexec_fn=s.preexec_fn, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = p.communicate(timeout=30)
    return p.returncode, out.decode(), err.decode(), p.pid


def test_the_launcher_is_used_where_setpriv_is(path: str) -> None:
    s = spawn_setup(None)
    if path == "setpriv":
        assert s.preexec_fn is None and s.prefix[0] == "/bin/sh" and "--pdeathsig=KILL" in s.prefix
    else:
        assert s.prefix == () and s.preexec_fn is not None


def test_the_child_joins_its_groups_and_runs_with_exactly_its_environment(path: str, tmp_path: Path) -> None:
    procs = (str(tmp_path / "a.procs"), str(tmp_path / "b.procs"))
    for f in procs:
        Path(f).write_text("")
    code, out, err, pid = run(["/bin/cat", "/proc/self/environ"], procs, {"ONLY": "this"})
    assert code == 0, err
    assert out == "ONLY=this\0"
    for f in procs:  # each "cgroup.procs" got the child's pid (the same process execs the command)
        assert Path(f).read_text().strip() == str(pid)


def test_no_core_dumps_and_no_new_privileges(path: str) -> None:
    code, out, err, _ = run(["/bin/cat", "/proc/self/status", "/proc/self/limits"])
    assert code == 0, err
    status = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert status["NoNewPrivs"].strip() == "1"
    core = next(line for line in out.splitlines() if line.startswith("Max core file size"))
    assert core.split()[4:6] == ["0", "0"], core  # soft and hard


@NEEDS_SETPRIV
def test_a_group_that_cannot_be_joined_stops_the_start(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-dir" / "cgroup.procs")
    code, out, err, _ = run(["/bin/echo", "ran"], (missing,))
    assert code == 126 and out == "" and "no-such-dir" in err


PARENT = """
import subprocess, sys, time
sys.path.insert(0, {root!r})
from interpreter_service.process import spawn as m
if {fallback}:
    m.setpriv_tool = lambda: None
s = m.spawn_setup(None)
p = subprocess.Popen([*s.prefix, "/bin/sleep", "60"], preexec_fn=s.preexec_fn)
print(p.pid, flush=True)
time.sleep(60)
"""


def test_the_child_is_killed_when_its_parent_dies(path: str) -> None:
    root = str(Path(__file__).resolve().parents[2])
    src = PARENT.format(root=root, fallback=path == "preexec")
    parent = subprocess.Popen([sys.executable, "-c", src], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.3)  # past the exec chain: it is `sleep` now
        assert _state(child) not in (None, "Z")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _state(child) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(child) in (None, "Z"), "the child outlived its parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None

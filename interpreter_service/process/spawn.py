"""How a worker's process is spawned: its set-up before exec (cgroups, user, limits), done so the server can vfork."""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from interpreter_service.process.confine import write_control
from interpreter_service.process.sandbox_dir import WorkerUser

__all__ = ["Spawn", "child_setup", "setpriv_tool", "spawn_setup"]

SH = "/bin/sh"
# Run by `sh -c` in the child, still as the server's user: join each cgroup named before `--` (its
# `cgroup.procs`), drop core dumps, then exec the rest (setpriv, env, the worker). Exit 126 if a step fails.
JOIN_AND_EXEC = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; ulimit -c 0 || exit 126; exec "$@"'


@dataclass(frozen=True)
class Spawn:
    """How to start a child: `prefix` goes before its command, `preexec_fn` (if any) runs in it before exec."""

    prefix: tuple[str, ...]
    preexec_fn: Callable[[], None] | None


@functools.cache
def setpriv_tool() -> tuple[str, str] | None:
    """util-linux's `setpriv` when it has `--pdeathsig` (2.33 and later), with `env` and `/bin/sh`: the paths
    of setpriv and env, else None. Asked once per process."""
    tool = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    env = shutil.which("env", path="/usr/bin:/bin")
    if tool is None or env is None or not os.access(SH, os.X_OK):
        return None
    try:
        done = subprocess.run(
            [tool, "--help"], capture_output=True, text=True, timeout=10, env={}, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (tool, env) if "--pdeathsig" in done.stdout and "--no-new-privs" in done.stdout else None


def spawn_setup(
    user: WorkerUser | None, cgroup_procs: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> Spawn:
    """The child's set-up before exec as commands it execs first: `sh` joins the cgroups and drops core
    dumps, `setpriv` switches to `user` (no supplementary groups), sets `no_new_privs` and asks for SIGKILL
    when the parent dies (after the switch, which would clear it), `env -i` gives the command exactly `env`
    (the shell adds its own variables; the spawn's own `env` only reaches the shell, or the command when the
    tools are missing). With no Python to run in the child, CPython spawns it by vfork, which holds the
    server's event loop far less than a fork copying the page tables of a server of 0.5-2 GB. Without those
    tools, `child_setup` in a forked child."""
    tools = setpriv_tool()
    if tools is None:
        return Spawn((), functools.partial(child_setup, user, tuple(cgroup_procs)))
    setpriv, env_tool = tools
    switch = (f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups") if user is not None else ()
    priv = (setpriv, *switch, "--no-new-privs", "--pdeathsig=KILL", "--")
    clean = (env_tool, "-i", *(f"{k}={v}" for k, v in (env or {}).items()))
    return Spawn((SH, "-c", JOIN_AND_EXEC, "vr-worker", *cgroup_procs, "--", *priv, *clean), None)


def child_setup(user: WorkerUser | None, cgroup_procs: Sequence[str] = ()) -> None:
    """In the child before exec (where `setpriv` is missing): join the worker's cgroups (`cgroup.procs`
    files; while still privileged), drop core dumps, become `user` (no supplementary groups; a failure
    aborts the start), then ask for SIGKILL when the parent dies (Linux; after the switch, which would clear
    it), so no worker outlives the pool, and set `no_new_privs` (no set-uid binary or file capability can
    give the worker more than it has)."""
    for path in cgroup_procs:
        write_control(path, str(os.getpid()))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if user is not None:
        os.setgroups([])
        os.setgid(user.gid)
        os.setuid(user.uid)
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        _LIBC.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS


def _load_libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()  # loaded here, not in the child (a fork of a threaded process should not import)

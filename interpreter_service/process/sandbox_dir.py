"""The neutral folder workers run from (distribution, worker modules, Deno binary) and the user they run as.

Sandboxed code can ask the JS runtime where it runs (`Deno.cwd()`, `Deno.mainModule`, `Deno.execPath()`,
Pyodide's `indexURL`). Started from the cache in the user's home and the project's virtual environment,
those answers name host paths. So a pool starts its workers from a fresh folder under the temp dir:

    /tmp/vr-sandbox-XXXXXXXX/      mode 0711 (others may pass through, not list)
        pyodide/                   a copy of the distribution and its start cache, read-only (0444, 0555)
        runtime/                   the worker's modules and Python (a copy of runtime/'s), read-only
        deno                       the Deno binary (a hard link, or a copy)
        cwd/                       mode 0111, empty: the workers' working directory, which they cannot read

and, when the server runs as root, as an unprivileged user (`resolve_user`), who can read exactly that.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from interpreter_service.api import InterpreterError

__all__ = ["SandboxDir", "WorkerUser", "prepare_sandbox_dir", "remove_sandbox_dir", "resolve_user"]

_OTHERS_EXEC = stat.S_IXOTH


@dataclass(frozen=True)
class WorkerUser:
    """Who the Deno processes run as (`uid`/`gid`, no supplementary groups)."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class SandboxDir:
    root: Path
    dist_dir: Path
    worker_script: Path
    deno_bin: str
    cwd: Path


def resolve_user(user: str | None) -> WorkerUser | None:
    """The workers' user: None -> "nobody" when this process is root, else no switch; "" -> no switch.

    A name other than the current user's needs root (`InterpreterError` otherwise, and for an unknown name).
    """
    if user is None:
        user = "nobody" if os.geteuid() == 0 else ""
    if not user:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise InterpreterError(f"code-interpreter user {user!r} does not exist") from None
    if entry.pw_uid == os.geteuid():
        return None  # already that user: nothing to switch
    if os.geteuid() != 0:
        raise InterpreterError(
            f"running the sandbox workers as {user!r} needs the server to run as root; "
            "pass an empty user to run them as the server's own user"
        )
    if entry.pw_uid == 0:
        raise InterpreterError("the code-interpreter user must not be root")
    return WorkerUser(user, entry.pw_uid, entry.pw_gid)


def _place(src: Path, dst: Path, *, mode: int) -> None:
    """Hard-link `src` to `dst` when others can already use it that way (`mode` bits), else copy it."""
    if src.stat().st_mode & mode == mode:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass  # another filesystem, or links refused: copy
    shutil.copyfile(src, dst)
    dst.chmod(0o555 if mode & _OTHERS_EXEC else 0o444)


def _copy_read_only(src_dir: Path, dist: Path) -> None:
    """Copy the distribution (its own files, not links to the cache's writable ones, so nothing a worker reads
    is writable through another name; files already read-only to all, as the start cache's are, are
    hard-linked), files 0444 and folders 0555 once filled."""
    folders = [dist]
    for src in sorted(src_dir.rglob("*")):
        dst = dist / src.relative_to(src_dir)
        if src.is_dir():
            dst.mkdir(mode=0o755, exist_ok=True)
            folders.append(dst)
        elif src.is_file():
            dst.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            if src.stat().st_mode & 0o666 == 0o444:
                _place(src, dst, mode=0o444)
            else:
                shutil.copyfile(src, dst)
                dst.chmod(0o444)
    for folder in reversed(folders):
        folder.chmod(0o555)


RUNTIME_FILES = ("*.mjs", "*.py")  # what a worker loads: its modules, and its Python imported as text


def _copy_runtime(src: Path, dst: Path) -> Path:
    """Copy the worker's modules (the main script's folder, `RUNTIME_FILES`) to `dst`: files 0444, the
    folder 0555 once filled. Deno loads the modules a script imports statically without a read grant."""
    dst.mkdir(mode=0o755)
    for pattern in RUNTIME_FILES:
        for file in src.glob(pattern):
            shutil.copyfile(file, dst / file.name)
            (dst / file.name).chmod(0o444)
    dst.chmod(0o555)
    return dst


def prepare_sandbox_dir(dist_dir: Path, worker_script: Path, deno_bin: str) -> SandboxDir:
    """A fresh sandbox folder under the temp dir holding what workers need (see the module docstring)."""
    root = Path(tempfile.mkdtemp(prefix="vr-sandbox-"))
    try:
        root.chmod(0o711)
        dist = root / "pyodide"
        dist.mkdir(mode=0o755)
        dist.chmod(0o755)  # mkdir's mode is masked by the umask
        _copy_read_only(Path(dist_dir), dist)
        script = _copy_runtime(Path(worker_script).parent, root / "runtime") / Path(worker_script).name
        deno = root / "deno"
        _place(Path(deno_bin), deno, mode=_OTHERS_EXEC)
        cwd = root / "cwd"
        cwd.mkdir()
        cwd.chmod(0o111)
    except BaseException:
        remove_sandbox_dir(root)
        raise
    return SandboxDir(root=root, dist_dir=dist, worker_script=script, deno_bin=str(deno), cwd=cwd)


def remove_sandbox_dir(root: Path) -> None:
    """Delete a sandbox folder (the Deno hard link only drops a name: the original stays)."""
    for folder in (root / "cwd", root / "runtime", root / "pyodide", *(root / "pyodide").rglob("*")):
        with contextlib.suppress(OSError):
            if folder.is_dir():
                folder.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)

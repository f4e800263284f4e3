"""A real PostgreSQL server for the tests: Debian's binaries (scripts/setup.sh installs them), run by `initdb` and
`pg_ctl` in a temporary folder on 127.0.0.1 at a free port (as the `postgres` user when the tests run as root,
which Postgres requires), stopped after the session; each test gets a database of its own."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.serving import free_port

__all__ = ["PostgresServer", "pg_url", "postgres_server"]


def _bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin with initdb, else the folder of an `initdb` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


class PostgresServer:
    """One postgres cluster: trust authentication for the `postgres` role, on 127.0.0.1 only."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None or not (bin_dir / "pg_ctl").exists():
            pytest.fail(
                "PostgreSQL's server binaries (initdb, pg_ctl) were not found under /usr/lib/postgresql/*/bin "
                "or on PATH: run scripts/setup.sh (it installs Debian's `postgresql`)",
                pytrace=False,
            )
        self.bin = bin_dir
        self.port = free_port()
        self.root = Path(
            tempfile.mkdtemp(prefix="vr-pg-")
        )  # not under pytest's 0700 folders: see `_as_owner`
        self.data = self.root / "data"
        self._as_root = os.geteuid() == 0
        if self._as_root:  # Postgres refuses to run as root: the `postgres` user owns and runs the cluster
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}{tail}")

    def start(self) -> PostgresServer:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


_created = 0


@pytest.fixture
async def pg_url(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """The URL of a new, empty database on the session's server (dropped after the test)."""
    global _created
    _created += 1
    name = f"test_{os.getpid()}_{_created}"
    admin = await asyncpg.connect(postgres_server.url())
    try:
        await admin.execute(f"CREATE DATABASE {name}")
        yield postgres_server.url(name)
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    finally:
        await admin.close()

"""A real PostgreSQL server for the tests: Debian's binaries (scripts/setup.sh installs them), run by `initdb` and
`pg_ctl` in a temporary folder on 127.0.0.1 at a free port (as the `postgres` user when the tests run as root,
which Postgres requires), stopped after the session; each test gets a database of its own."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from scripts.pg_cluster import PostgresCluster, PostgresMissing

__all__ = ["PostgresServer", "pg_url", "postgres_server"]

PostgresServer = PostgresCluster  # the tests' name for it


def start_cluster() -> PostgresCluster:
    """A started cluster; no server binaries fail the test with the set-up command to run."""
    try:
        cluster = PostgresCluster()
    except PostgresMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    return cluster.start()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_cluster()
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
    finally:
        await admin.close()
    yield postgres_server.url(name)
    admin = await asyncpg.connect(postgres_server.url())  # a new connection: the test may restart the server
    try:
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    finally:
        await admin.close()

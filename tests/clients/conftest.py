"""One real server for every client module: vLLM on CPU (tiny model, outputs forced) and real sandbox workers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import openai
import pytest

from tests.support.mcp_server import McpTestServer
from tests.support.real import tiny_model_server
from tests.support.serving import LiveServer
from vllm_responses.config import Config


@pytest.fixture(scope="package")
def real_server(mcp_server: McpTestServer) -> Iterator[Any]:
    # Package-scoped: the engine takes about a minute to start, and every client module can share it.
    # VR_CLIENTS_SERVER=http://127.0.0.1:PORT reuses a tiny-model server already running (tests/support/real.py's).
    if url := os.environ.get("VR_CLIENTS_SERVER"):
        yield SimpleNamespace(base_url=url.rstrip("/"))
        return
    # MCP servers are refused unless allowed (--mcp-allowed-urls): this one is.
    server = tiny_model_server(config=Config(code_interpreter_timeout=20, mcp_allowed_urls=(mcp_server.url,)))
    yield server
    server.stop()


@pytest.fixture
def base_url(real_server: LiveServer) -> str:
    """What a user passes as the client's base URL (`.../v1`)."""
    return real_server.base_url + "/v1"


@pytest.fixture
async def async_sdk() -> AsyncIterator[Callable[..., openai.AsyncOpenAI]]:
    """Makes `openai.AsyncOpenAI` clients on a base URL (`.../v1`; no retries), closed when the test ends."""
    made: list[openai.AsyncOpenAI] = []

    def make(base_url: str, **options: Any) -> openai.AsyncOpenAI:
        made.append(openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, **options))
        return made[-1]

    yield make
    for sdk in made:
        await sdk.close()

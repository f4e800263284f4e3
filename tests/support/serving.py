"""Runs a real uvicorn server on 127.0.0.1 in a background thread, for tests that use real HTTP clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.types import ASGIApp

from vllm_responses.api.app import build_app
from vllm_responses.api.state import EmbedderOpener, Opener, no_embedder
from vllm_responses.config import Config
from vllm_responses.store.memory import MemoryStore
from vllm_responses.store.open import store_for

__all__ = ["LiveServer", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def proxy_trap(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """HTTP_PROXY in this process's environment set to a proxy on 127.0.0.1 that answers 502 and records the
    paths it was asked for (the list yielded): a fetch that honoured the environment would show there."""
    proxied: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            proxied.append(self.path)
            self.send_response(502)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", free_port()), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        for name in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.server_port}")
        yield proxied
    finally:
        proxy.shutdown()
        proxy.server_close()


class LiveServer:
    """`build_app(config, opener)` served by uvicorn in a thread; `stop()` shuts it down cleanly. `asgi`, when
    given, wraps the app uvicorn serves (a test's middleware in front of it, as a recorder of requests);
    `open_embedder` opens its embedding model (default: none)."""

    def __init__(
        self,
        config: Config,
        engine: Any,
        interpreter: Any,
        *,
        db: str | None = None,
        opener: Opener | None = None,
        asgi: Callable[[ASGIApp], ASGIApp] | None = None,
        open_embedder: EmbedderOpener = no_embedder,
    ) -> None:
        self.port = free_port()
        self.config = Config(**{**config.__dict__, "port": self.port})
        self.engine = engine
        self.interpreter = interpreter
        self.store = store_for(db) if db else MemoryStore()  # a SQLite file or a Postgres URL

        @asynccontextmanager
        async def fixed(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
            await self.store.open()
            try:
                yield self.engine, self.interpreter, self.store
            finally:
                await self.store.aclose()

        @asynccontextmanager
        async def tracked(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
            assert opener is not None
            async with opener(cfg) as (self.engine, self.interpreter, self.store):
                yield self.engine, self.interpreter, self.store

        opener_used = tracked if opener is not None else fixed
        self.app = build_app(self.config, opener_used, open_embedder=open_embedder)
        self.server = uvicorn.Server(
            uvicorn.Config(
                asgi(self.app) if asgi else self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="on",
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 600.0) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.thread.is_alive():
                raise RuntimeError("the server thread died during start-up")
            try:
                if httpx.get(self.base_url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError("the server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)

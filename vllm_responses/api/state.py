"""The app's state: `open_state` builds it over the opened components, `app_state` is how routes reach it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from interpreter_service import Interpreter
from vllm_responses.api.auth import KeyRing
from vllm_responses.config import Config
from vllm_responses.engine.base import Engine
from vllm_responses.engine.embedder import Embedder
from vllm_responses.runs.restream import Restreams
from vllm_responses.service.embeddings import EmbeddingsService
from vllm_responses.service.lifecycle import Lifecycle
from vllm_responses.service.quotas import KeyBounds, ProjectLimits
from vllm_responses.service.responses import ResponsesService
from vllm_responses.service.vector_store_setup import open_vector_stores
from vllm_responses.service.vector_stores import VectorStoreService
from vllm_responses.store.base import ResponseStore

__all__ = ["AppState", "EmbedderOpener", "Opener", "app_state", "no_embedder", "open_state"]

# Opens the engine, the sandbox (None: no code interpreter) and the store, and closes them on exit.
Opener = Callable[[Config], AbstractAsyncContextManager[tuple[Engine, Interpreter | None, ResponseStore]]]
# Opens the embedding model (None: none served), and closes it on exit.
EmbedderOpener = Callable[[Config], AbstractAsyncContextManager[Embedder | None]]


@asynccontextmanager
async def no_embedder(config: Config) -> AsyncIterator[Embedder | None]:
    """The `EmbedderOpener` of an app that serves no embedding model."""
    yield None


@dataclass(frozen=True)
class AppState:
    """What the routes use, built once per start of the app by `open_state`.

    Parameters
    ----------
    service: creates, runs and keeps the responses (and holds conversations and containers).
    lifecycle: serving, draining or failed; the refusal new responses get when not serving.
    restreams: streams of background responses this process does not run, from their stored events.
    started_at: when the app started (Unix time).
    keepalive_s: seconds without an event before an SSE stream gets a keep-alive comment (0: never).
    embeddings: `/v1/embeddings` over the served embedding model (if any).
    vector_stores: the Vector Stores API and its ingestion.
    """

    service: ResponsesService
    lifecycle: Lifecycle
    restreams: Restreams
    started_at: float
    keepalive_s: float
    embeddings: EmbeddingsService
    vector_stores: VectorStoreService


def app_state(connection: HTTPConnection) -> AppState:
    """The state of the app serving `connection` (a request or a WebSocket), as the lifespan set it."""
    state: AppState = connection.app.state.vr
    return state


def key_bounds(keys: KeyRing) -> list[KeyBounds]:
    """The bounds each key in the keys file gives its project."""
    return [
        (k.project, k.max_containers, k.max_sandbox_memory_mb, k.max_stored_bytes) for k in keys.keys.values()
    ]


@asynccontextmanager
async def open_state(
    config: Config,
    open_components: Opener,
    lifecycle: Lifecycle,
    keys: KeyRing,
    open_embedder: EmbedderOpener = no_embedder,
) -> AsyncIterator[AppState]:
    """Open the components and the embedding model, build the service over them and start `lifecycle` watching
    it; on exit the lifecycle stops watching, the service closes, then the components. Each project's bounds are
    the server's `--project-max-*` and those its keys give, taken anew when `keys` is read again."""
    limits = ProjectLimits(config, key_bounds(keys))

    def follow(ring: KeyRing) -> None:  # the keys file read again (SIGHUP): its bounds too
        limits.update(key_bounds(ring))

    keys.on_reload.append(follow)
    try:
        async with open_embedder(config) as embedder:
            embeddings = EmbeddingsService(embedder, config.max_concurrent_embeddings)
            async with _opened(config, open_components, lifecycle, limits, embeddings) as state:
                yield state
    finally:
        keys.on_reload.remove(follow)


@asynccontextmanager
async def _opened(
    config: Config,
    open_components: Opener,
    lifecycle: Lifecycle,
    limits: ProjectLimits,
    embeddings: EmbeddingsService,
) -> AsyncIterator[AppState]:
    async with open_components(config) as (engine, interpreter, store):
        service = ResponsesService(config, engine, interpreter, store, limits)
        await service.recover()  # background responses a crash left running: failed, not 404
        owner = service.replica.id
        opened = open_vector_stores(
            config, store, service.files, service.extraction, embeddings.embedder, owner
        )
        try:
            async with opened as vector_stores:
                # their files' bytes count in their project's stored bytes
                limits.counters.append(vector_stores.rows.project_bytes)
                service.planner.vector_search = vector_stores.searcher  # the file_search tool's
                state = AppState(
                    service=service,
                    lifecycle=lifecycle,
                    restreams=Restreams(store, config.restream_poll_interval),
                    started_at=time.time(),
                    keepalive_s=config.sse_keepalive,
                    embeddings=embeddings,
                    vector_stores=vector_stores,
                )
                lifecycle.attach(service.runs, engine, service.admission)
                try:
                    yield state
                finally:
                    await lifecycle.detach()
        finally:
            await service.aclose()

"""Opens the real components (vLLM engine, sandbox, the store `--db` names) and runs the app under uvicorn."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from interpreter_service import Interpreter
from vllm_responses.api.app import build_app
from vllm_responses.api.hosts import is_loopback, uses_default_hosts
from vllm_responses.config import Config
from vllm_responses.engine.base import Engine, EngineError
from vllm_responses.engine.embedder import Embedder, LazyEmbedder
from vllm_responses.observe.logs import configure_logging
from vllm_responses.service.lifecycle import Lifecycle
from vllm_responses.store.base import ResponseStore
from vllm_responses.store.open import open_store

__all__ = ["interpreter_from_config", "open_components", "open_embedder", "run"]

logger = logging.getLogger("vllm_responses")


def _say(message: str) -> None:
    logger.info(message)  # through `logs.configure_logging`'s handler: a JSON line with `--log-format json`


def interpreter_from_config(config: Config) -> Interpreter | None:
    """The sandbox the settings ask for, not started: none, the shared service at `code_interpreter_url`
    (no worker is started here), or a pool of Deno workers in this process."""
    if not config.code_interpreter:
        return None
    if config.code_interpreter_url:
        from interpreter_service.service.client import HTTPInterpreter

        return HTTPInterpreter(
            config.code_interpreter_url,
            token=config.code_interpreter_token,
            default_timeout_s=config.code_interpreter_timeout,
        )
    from interpreter_service.pool import PoolConfig, WorkerPool

    return WorkerPool(
        PoolConfig(
            workers=config.code_interpreter_workers,
            timeout_s=config.code_interpreter_timeout,
            idle_expiry_s=config.code_interpreter_idle_expiry,
            allow_net=config.code_interpreter_allow_net,
            max_workers=config.code_interpreter_max_workers,
            max_spares=config.code_interpreter_max_spares,
            memory_budget=config.code_interpreter_memory_budget,
            budget_counts=config.code_interpreter_budget_counts,
            worker_reserve=config.code_interpreter_worker_reserve,
            queue_timeout_s=config.code_interpreter_queue_timeout,
            user=config.code_interpreter_user,
            isolation=config.code_interpreter_isolation,
        )
    )


@asynccontextmanager
async def open_components(config: Config) -> AsyncIterator[tuple[Engine, Interpreter | None, ResponseStore]]:
    """Open the store, start the sandbox warming, build the engine meanwhile; close all on exit."""
    async with AsyncExitStack() as stack:
        store = await open_store(config.db, pool_size=config.db_pool_size)  # migrated, or SchemaTooNew
        stack.push_async_callback(store.aclose)

        pool = interpreter_from_config(config)
        warming: asyncio.Task[Any] | None = None
        if pool is not None:
            if config.code_interpreter_url:
                _say(f"using the shared sandbox service at {config.code_interpreter_url}")
            else:
                _say(f"warming {config.code_interpreter_workers} sandbox worker(s) (Deno + Pyodide)...")
            warming = asyncio.create_task(pool.start())
            stack.push_async_callback(pool.aclose)
            for _ in range(10):  # let the worker processes spawn before the engine build blocks the loop
                await asyncio.sleep(0.01)

        from vllm_responses.engine.vllm import VLLMEngine

        args = config.engine_args["args"]
        t0 = time.monotonic()
        _say(f"loading model {args.model} into vLLM (dtype {args.dtype})...")
        engine = await VLLMEngine.start(
            args,
            model_name=config.served_model_names[0] if config.served_model_names else None,
            tool_parser=config.tool_parser,
        )
        stack.push_async_callback(engine.aclose)
        _say(f"engine ready in {time.monotonic() - t0:.1f} s (tool-call parser: {engine.parser_name})")
        if warming is not None:
            await warming
            _say("sandbox ready")
        yield engine, pool, store
        _say("shutting down: engine, sandbox workers, store")


def _local_embedder(folder: Path) -> LazyEmbedder:
    """The embedding model in `folder`, loaded into a pooling vLLM engine of this process on first use
    (bf16 where the CPU computes it natively, else float32, as the chat engine; eager on CPU)."""
    from vllm_responses.engine.args import cpu_dtype, is_cpu_platform
    from vllm_responses.engine.models import embedding_model_info

    info = embedding_model_info(folder)  # EngineError where it is no model folder: the start fails
    name = folder.name

    async def load() -> Embedder:
        from vllm_responses.engine.vllm_embedder import VLLMEmbedder, pooling_engine_args

        cpu = is_cpu_platform()
        args = pooling_engine_args(str(folder), dtype=cpu_dtype() if cpu else "auto", cpu=cpu)
        return await VLLMEmbedder.start(args, name)

    return LazyEmbedder(
        load, model_name=name, dimensions=info.dimensions, max_input_tokens=info.max_input_tokens
    )


async def embedder_from_config(config: Config) -> Embedder | None:
    """The embedding model the settings ask for: none (`--embedding-model none`, or the embedded one not set
    up), a remote server's (`--embedding-url`: asked for its model and vector length now), a model folder
    (loaded on first use), or the embedded all-MiniLM-L6-v2."""
    from vllm_responses.engine.models import default_embedding_model_path

    chosen = config.embedding_model
    if chosen is not None and chosen.lower() == "none":
        return None
    if config.embedding_url:
        from vllm_responses.engine.remote_embedder import RemoteEmbedder

        remote = await RemoteEmbedder.start(
            config.embedding_url, chosen, timeout_s=config.embedding_timeout, api_key=config.embedding_api_key
        )
        _say(f"embedding with {remote.model_name} at {config.embedding_url} ({remote.dimensions} dimensions)")
        return remote
    if chosen is not None:
        return _local_embedder(Path(chosen).expanduser())
    folder = default_embedding_model_path()
    if folder is None:
        _say("no embedding model: the embedded all-MiniLM-L6-v2 is not set up (scripts/setup.sh)")
        return None
    return _local_embedder(folder)


@asynccontextmanager
async def open_embedder(config: Config) -> AsyncIterator[Embedder | None]:
    """`embedder_from_config`, closed on exit (a loaded model's engine shut down)."""
    try:
        embedder = await embedder_from_config(config)
    except EngineError as exc:
        raise EngineError(f"the embedding model: {exc.message}", code=exc.code) from exc
    try:
        yield embedder
    finally:
        if embedder is not None:
            await embedder.aclose()


class _Server(uvicorn.Server):
    """uvicorn's server, with SIGINT/SIGTERM handed to the lifecycle: the first drains (`--shutdown-grace`)
    and then stops the server; a second forces the exit at once, as uvicorn's second Ctrl+C does. SIGHUP
    calls `on_hangup` (the keys file read again) while it serves."""

    def __init__(self, config: uvicorn.Config, lifecycle: Lifecycle, on_hangup: Callable[[], object]) -> None:
        super().__init__(config)
        self.lifecycle = lifecycle
        self.on_hangup = on_hangup
        self._signalled = False

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, self.on_hangup)
        try:
            with super().capture_signals():
                yield
        finally:
            loop.remove_signal_handler(signal.SIGHUP)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not uvicorn's: it re-raises the signal after serving, so the process would end killed by it.
        if self._signalled or self.should_exit:
            self.should_exit = self.force_exit = True
            return
        self._signalled = True
        logger.info("received %s", signal.Signals(sig).name)
        self.lifecycle.request_shutdown()


def run(config: Config) -> int:
    """Serve until SIGINT/SIGTERM (drained, then uvicorn runs the lifespan shutdown) or the engine dies.
    Returns the exit status: 0 after a shutdown, 3 when start-up failed, 4 (`ENGINE_DEAD_EXIT`) when the
    engine died."""
    configure_logging(config.log_format, config.log_level)
    if not is_loopback(config.host) and uses_default_hosts(config):
        logger.warning(
            "listening on %s with the default --allowed-hosts (the loopback names, and --host when it is "
            "one address): a request naming this server otherwise (its DNS name, a load balancer's) gets a "
            "400; list those names in --allowed-hosts (VLLM_RESPONSES_ALLOWED_HOSTS)",
            config.host,
        )
    lifecycle = Lifecycle(config.shutdown_grace)
    app = build_app(config, open_components, lifecycle=lifecycle, open_embedder=open_embedder)
    server = _Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            lifespan="on",
            # JSON: uvicorn's loggers write through our handler; text: uvicorn's own format, as before.
            log_config=None if config.log_format == "json" else uvicorn.config.LOGGING_CONFIG,
            # responses are drained before uvicorn is told to stop: what is left (idle streams, sockets) goes
            timeout_graceful_shutdown=5,
            ws_max_size=config.max_request_bytes,  # a WebSocket message is bounded as a request body is
        ),
        lifecycle,
        on_hangup=app.state.keys.reload,  # SIGHUP: the keys file read again
    )

    def stop() -> None:
        server.should_exit = True

    lifecycle.stop_server = stop
    asyncio.run(server.serve())
    if not server.started:
        return 3  # start-up failed (as uvicorn's STARTUP_FAILURE)
    return lifecycle.exit_code

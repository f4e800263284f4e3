"""Opens the real components (vLLM engine, sandbox pool, SQLite store) and runs the app under uvicorn."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import uvicorn

from interpreter_service import Interpreter
from vllm_responses.app import build_app
from vllm_responses.config import Config
from vllm_responses.engine.base import Engine
from vllm_responses.store import MemoryStore, ResponseStore, SQLiteStore

__all__ = ["open_components", "run"]

logger = logging.getLogger("vllm_responses")


def _say(message: str) -> None:
    print(f"[vllm-responses] {message}", file=sys.stderr, flush=True)


@asynccontextmanager
async def open_components(config: Config) -> AsyncIterator[tuple[Engine, Interpreter | None, ResponseStore]]:
    """Start the sandbox pool warming, build the engine meanwhile, open the store; close all on exit."""
    async with AsyncExitStack() as stack:
        store: ResponseStore = MemoryStore() if config.db == ":memory:" else SQLiteStore(config.db)
        await store.open()
        stack.push_async_callback(store.aclose)

        pool: Interpreter | None = None
        warming: asyncio.Task[Any] | None = None
        if config.code_interpreter:
            from interpreter_service.pool import WorkerPool

            pool = WorkerPool(
                workers=config.code_interpreter_workers,
                timeout_s=config.code_interpreter_timeout,
                idle_expiry_s=config.code_interpreter_idle_expiry,
                allow_net=config.code_interpreter_allow_net,
                max_workers=config.code_interpreter_max_workers,
                memory_budget=config.code_interpreter_memory_budget,
                queue_timeout_s=config.code_interpreter_queue_timeout,
                user=config.code_interpreter_user,
            )
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
            _say("sandbox pool ready")
        yield engine, pool, store
        _say("shutting down: engine, sandbox workers, store")


def run(config: Config) -> int:
    """Serve until SIGINT/SIGTERM (uvicorn handles both and runs the lifespan shutdown). Returns an exit code."""
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = build_app(config, open_components)

    server = uvicorn.Server(
        uvicorn.Config(app, host=config.host, port=config.port, log_level=config.log_level, lifespan="on")
    )

    async def main() -> None:
        await server.serve()

    asyncio.run(main())
    if not server.started:
        return 3  # start-up failed (as uvicorn's STARTUP_FAILURE)
    return 0

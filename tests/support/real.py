"""A live server over the real parts: vLLM on CPU with the tiny deterministic model, and real sandbox workers."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import EngineEvent, GenerateRequest
from vllm_responses.store.memory import MemoryStore

__all__ = [
    "TINY",
    "ForcedEngine",
    "exactly",
    "hermes_call",
    "long_tiny_model",
    "tiny_model_server",
    "tiny_vision_model_path_or_fail",
]

TINY = "tiny-tool-model"


def hermes_call(code: str) -> str:
    """The tiny model's tool-call text for a code-interpreter call (its template is Hermes-style)."""
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def exactly(text: str) -> dict[str, str]:
    """A structured-outputs constraint that makes the model write exactly `text`."""
    return {"regex": re.escape(text)}


class ForcedEngine:
    """The real engine, each model call forced to write the next text of `plan` (vLLM structured outputs, as
    the `structured_outputs` body field does): for clients that build their own requests (Codex CLI).
    `requests` records what each call was asked."""

    def __init__(self, engine: Any, plan: Sequence[str] = ()) -> None:
        self.engine = engine
        self.plan = list(plan)
        self.requests: list[GenerateRequest] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineEvent]:
        self.requests.append(request)
        if not self.plan:
            raise AssertionError("the model was called more often than the test planned")
        sampling = dataclasses.replace(request.sampling, structured=exactly(self.plan.pop(0)))
        return self.engine.generate(dataclasses.replace(request, sampling=sampling))  # type: ignore[no-any-return]


def long_tiny_model(parent: Path, window: int = 65536) -> Path:
    """A copy of the tiny model under `parent` whose config allows a `window`-token context (its weights are
    random: positions past its 4096 change nothing that matters), for prompts as long as Codex CLI's."""
    copy = parent / "tiny-long"
    shutil.copytree(tiny_model_path_or_fail(), copy)
    config = json.loads((copy / "config.json").read_text())
    config["max_position_embeddings"] = window
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def tiny_model_path_or_fail() -> Path:
    """The tiny model built by scripts/setup.sh (the test fails, saying so, when it is missing)."""
    from vllm_responses.engine.models import tiny_model_path

    path = tiny_model_path()
    if not (path / "config.json").is_file():
        pytest.fail(f"the tiny model is missing at {path}: run scripts/setup.sh")
    return path


def tiny_vision_model_path_or_fail() -> Path:
    """The tiny vision model built by scripts/setup.sh (the test fails, saying so, when it is missing)."""
    from vllm_responses.engine.models import tiny_vision_model_path

    path = tiny_vision_model_path()
    if not (path / "config.json").is_file():
        pytest.fail(f"the tiny vision model is missing at {path}: run scripts/setup.sh")
    return path


def tiny_model_server(
    workers: int = 2,
    *,
    model: Path | None = None,
    max_model_len: int = 2048,
    engine_flags: Sequence[str] = (),
    config: Config | None = None,
    tool_parser: str = "hermes",
    wrap: Callable[[Any], Any] | None = None,
    asgi: Callable[[Any], Any] | None = None,
    open_embedder: Any = None,
) -> LiveServer:
    """Start (and return) a server on the tiny model (or a copy of it at `model`) and a real pool (none with
    `workers=0`); the caller stops it. `engine_flags` are more vLLM flags; `config` replaces the settings;
    `tool_parser` is the `--tool-call-parser` name (ours or vLLM's). A `config` naming
    `code_interpreter_url` uses that shared sandbox service instead of a pool. `wrap`, when given, is handed
    the engine and returns what the server uses (a test's engine in front of the real one); `asgi`, the app
    and returns what uvicorn serves (`LiveServer`'s); `open_embedder`, the embedding model's opener (default:
    none)."""
    from interpreter_service.pool import PoolConfig, WorkerPool
    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace
    from vllm_responses.engine.vllm import VLLMEngine
    from vllm_responses.server import interpreter_from_config

    path = model or tiny_model_path_or_fail()

    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        async with AsyncExitStack() as stack:
            if cfg.code_interpreter_url:  # a shared sandbox service, opened as `serve` opens it
                shared = interpreter_from_config(cfg)
                assert shared is not None
                pool = await stack.enter_async_context(shared)
            else:
                pool = (
                    await stack.enter_async_context(WorkerPool(PoolConfig(workers=workers, timeout_s=20)))
                    if workers
                    else None
                )
            parser = add_engine_cli_args(argparse.ArgumentParser())
            flags = ["--max-model-len", str(max_model_len), "--seed", "0", *engine_flags]
            args = engine_args_from_namespace(parser.parse_args(flags), str(path))
            engine = await VLLMEngine.start(args, model_name=TINY, tool_parser=tool_parser)
            stack.push_async_callback(engine.aclose)
            yield (wrap(engine) if wrap else engine), pool, MemoryStore()

    settings = config or Config(code_interpreter_timeout=20)
    embedding = {"open_embedder": open_embedder} if open_embedder is not None else {}
    return LiveServer(settings, None, None, opener=opener, asgi=asgi, **embedding).start(timeout=600)

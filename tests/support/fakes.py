"""Test doubles: a scripted engine and an in-process interpreter, for fast protocol tests (never the only proof)."""

from __future__ import annotations

import ast
import asyncio
import collections
import contextlib
import hashlib
import io
import itertools
import json
import threading
import time
import traceback
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, cast

from interpreter_service import (
    ContainerInfo,
    ContainerNotFound,
    ExecutionResult,
    FileInfo,
    Interpreter,
    InterpreterError,
    OwnerQuota,
    PoolExhausted,
    data_path,
)
from vllm_responses.engine.base import EngineRejected, EngineUnavailable
from vllm_responses.engine.types import (
    CODE_TOOL_NAME,
    EngineEvent,
    Finish,
    GenerateRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from vllm_responses.protocol.items import ResponseEcho

# A 1x1 PNG, what the fake interpreter returns for code containing "# fake-image".
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def chunks(s: str, n: int = 3) -> list[str]:
    return [s[i : i + n] for i in range(0, len(s), n)] or [""]


def say(text: str, reason: str = "stop") -> list[EngineEvent]:
    return [TextDelta(c) for c in chunks(text)] + [Finish(reason, Usage())]  # type: ignore[arg-type]


def think(text: str) -> list[EngineEvent]:
    return [ReasoningDelta(c) for c in chunks(text)]


def code_call(code: str, index: int = 0, *, finish: bool = True) -> list[EngineEvent]:
    args = json.dumps({"code": code})
    events: list[EngineEvent] = [ToolCallStart(index, CODE_TOOL_NAME)]
    events += [ToolCallDelta(index, c) for c in chunks(args, 4)]
    events.append(ToolCallEnd(index))
    return events + ([Finish("tool_calls", Usage())] if finish else [])


def function_call(
    name: str, arguments: dict[str, Any], index: int = 0, *, finish: bool = True
) -> list[EngineEvent]:
    args = json.dumps(arguments)
    events: list[EngineEvent] = [ToolCallStart(index, name)]
    events += [ToolCallDelta(index, c) for c in chunks(args, 5)]
    events.append(ToolCallEnd(index))
    return events + ([Finish("tool_calls", Usage())] if finish else [])


Script = list[EngineEvent] | Callable[[GenerateRequest], list[EngineEvent]]


class FakeEngine:
    """Plays scripted events: `engine.script` is a list with one entry per model call (the last repeats).

    Usage is synthesized (input = prompt characters // 4, output = number of deltas). Like vLLM, a call
    stops after `sampling.max_tokens` deltas with reason "length", whatever the script says next.
    `requests` records what each call was asked; `aborted` the ids of calls closed before their finish.
    `context` (None: unlimited) is the context window: a longer prompt is refused as vLLM refuses it;
    `sampling_defaults` stands for the model's generation config (`default_sampling`).
    `hold`: while it is an unset `threading.Event`, every call waits before its first event (a busy engine
    whose generations the test holds open); `seqs` is `max_num_seqs`; `refusal`, when set, is raised by
    `precheck` (a value the engine refuses up front); `prechecked` records what `precheck` was asked.
    """

    def __init__(self, name: str = "fake-model") -> None:
        self._name = name
        self.context: int | None = None
        self.sampling_defaults: dict[str, Any] = {}
        self.script: list[Script] = [say("Hello from the fake engine.")]
        self.delay = 0.0
        self.requests: list[GenerateRequest] = []
        self.aborted: list[str] = []
        self.active = 0
        self._dead: str | None = None
        self.hold: threading.Event | None = None
        self.seqs = 256
        self.refusal: EngineRejected | None = None
        self.prechecked: list[GenerateRequest] = []
        self.images = False  # `takes_images`: a vision model

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def takes_images(self) -> bool:
        return self.images

    @property
    def max_model_len(self) -> int:
        return self.context if self.context is not None else 1 << 30

    @property
    def default_sampling(self) -> Mapping[str, Any]:
        return dict(self.sampling_defaults)

    def reset(self, *script: Script, delay: float = 0.0) -> None:
        self.script = list(script) or [say("Hello from the fake engine.")]
        self.delay = delay
        self.context = None
        self.sampling_defaults = {}
        self.requests.clear()
        self.aborted.clear()
        self._dead = None
        self.hold = None
        self.refusal = None
        self.prechecked.clear()

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        n = len(self.requests)
        self.requests.append(request)
        entry = self.script[min(n, len(self.script) - 1)]
        events = entry(request) if callable(entry) else entry
        prompt = self._fits(request)
        finished = False
        self.active += 1
        hold = self.hold
        try:
            while hold is not None and not hold.is_set():
                await asyncio.sleep(0.01)
            out = 0
            budget = request.sampling.max_tokens
            for ev in events:
                if self.delay:
                    await asyncio.sleep(self.delay)
                else:
                    await asyncio.sleep(0)
                if isinstance(ev, Finish):
                    finished = True
                    yield Finish(ev.reason, Usage(input_tokens=prompt, output_tokens=out))
                    return
                if budget is not None and out == budget:  # the budget is spent before the script ends
                    finished = True
                    yield Finish("length", Usage(input_tokens=prompt, output_tokens=out))
                    return
                out += 1
                yield ev
            finished = True
        finally:
            self.active -= 1
            if not finished:
                self.aborted.append(request.request_id)

    @staticmethod
    def prompt_tokens(request: GenerateRequest) -> int:
        """A deterministic stand-in for a tokenizer: characters of the turns and offered tools // 4 + 1."""
        chars = sum(
            len(getattr(t, "text", "") or getattr(t, "arguments", "") or getattr(t, "output", ""))
            for t in request.turns
        )
        if request.tool_choice != "none":
            chars += sum(
                len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in request.tools
            )
        return chars // 4 + 1

    async def count_tokens(self, request: GenerateRequest) -> int:
        return self.prompt_tokens(request)

    def _fits(self, request: GenerateRequest) -> int:
        prompt = self.prompt_tokens(request)
        if prompt >= self.max_model_len:
            raise EngineRejected(
                f"the prompt is {prompt} tokens; this model's context is {self.max_model_len}",
                code="context_length_exceeded",
            )
        return prompt

    @property
    def max_num_seqs(self) -> int:
        return self.seqs

    async def precheck(self, request: GenerateRequest) -> int:
        self.prechecked.append(request)
        if self.refusal is not None:
            raise self.refusal
        return self._fits(request)

    @property
    def dead(self) -> str | None:
        return self._dead

    @dead.setter
    def dead(self, reason: str | None) -> None:  # set it to play a dead engine
        self._dead = reason

    async def ping(self) -> None:
        if self.dead is not None:
            raise EngineUnavailable(self.dead, code="engine_dead")

    async def aclose(self) -> None:
        return None


class FakeInterpreter(Interpreter):
    """Runs code with `exec` in this process (trusted test code only), one globals dict per container.

    Files live in memory: code calls `save(path, data)` and `load(path)` (paths under DATA_DIR unless
    absolute) instead of touching the real filesystem; saved files are reported in `files_changed`.
    """

    def __init__(self, max_containers: int = 8) -> None:
        self.max_containers = max_containers
        self.containers: dict[str, dict[str, Any]] = {}
        self.infos: dict[str, ContainerInfo] = {}
        self.files: dict[str, dict[str, bytes]] = {}  # container id -> full path -> content
        self.uploaded: dict[str, set[str]] = {}
        self.executions: list[tuple[str, str]] = []
        self.cancelled = 0
        self.pins: collections.Counter[str] = collections.Counter()  # `pin` minus `unpin`, by container
        self.pins_seen: list[int] = []  # the container's pins at each `execute`
        self.quotas: list[OwnerQuota | None] = []  # the quota each `create_container` was given
        self._ids = itertools.count(1)

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        self.containers.clear()

    async def create_container(
        self,
        *,
        name: str | None = None,
        memory_limit: str | None = None,
        expires_after_s: float | None = None,
        owner: str | None = None,
        quota: OwnerQuota | None = None,
        wait_for_worker: bool = True,
    ) -> ContainerInfo:
        self.quotas.append(quota)
        if len(self.containers) >= self.max_containers:
            raise PoolExhausted("all fake containers are in use")
        cid = f"cntr_{next(self._ids):024x}"  # the form real ids have
        now = time.time()
        self.containers[cid] = {}
        self.files[cid] = {}
        self.uploaded[cid] = set()
        expiry = min(expires_after_s or 1200.0, 1200.0)
        self.infos[cid] = ContainerInfo(
            cid, now, now, expiry, name=name, memory_limit=memory_limit, owner=owner
        )
        return self.infos[cid]

    def pin(self, container_id: str) -> None:
        self.pins[container_id] += 1

    def unpin(self, container_id: str) -> None:
        self.pins[container_id] -= 1

    async def get_container(self, container_id: str) -> ContainerInfo:
        if container_id not in self.infos:
            raise ContainerNotFound(container_id)
        return self.infos[container_id]

    async def list_containers(self) -> list[ContainerInfo]:
        return list(self.infos.values())

    async def delete_container(self, container_id: str) -> None:
        if container_id not in self.infos:
            raise ContainerNotFound(container_id)
        del self.infos[container_id], self.containers[container_id], self.files[container_id]
        del self.uploaded[container_id]

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        if container_id not in self.containers:
            raise ContainerNotFound(container_id)
        self.executions.append((container_id, code))
        self.pins_seen.append(self.pins[container_id])
        if "# fake-sleep" in code:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if "# fake-timeout" in code:
            return ExecutionResult(
                logs="", error=f"Execution timed out after {timeout_s} s", error_kind="timeout"
            )
        env = self.containers[container_id]
        files = self.files[container_id]
        changed: list[str] = []

        def save(path: str, data: str | bytes) -> None:
            full = data_path(path)
            files[full] = data.encode() if isinstance(data, str) else data
            changed.append(full)

        env["save"] = save
        env["load"] = lambda path: files[data_path(path)].decode()
        buf = io.StringIO()
        error = None
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                exec(compile(tree, "<cell>", "exec"), env)
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), env)
                    if value is not None:
                        print(repr(value))
        except Exception as exc:
            buf.write(traceback.format_exc())
            error = f"{type(exc).__name__}: {exc}"
        images = (TINY_PNG,) if "# fake-image" in code else ()
        return ExecutionResult(
            logs=buf.getvalue(),
            images=images,
            error=error,
            error_kind="exception" if error else None,
            files_changed=tuple(sorted(set(changed))),
        )

    def _info(self, container_id: str, path: str) -> FileInfo:
        fid = "cfile_" + hashlib.sha256(f"{container_id}:{path}".encode()).hexdigest()[:24]
        source = "user" if path in self.uploaded[container_id] else "assistant"
        return FileInfo(fid, container_id, path, len(self.files[container_id][path]), 1700000000.0, source)

    def _files(self, container_id: str) -> dict[str, bytes]:
        if container_id not in self.files:
            raise ContainerNotFound(container_id)
        return self.files[container_id]

    async def write_file(self, container_id: str, path: str, data: bytes) -> FileInfo:
        full = data_path(path)
        self._files(container_id)[full] = data
        self.uploaded[container_id].add(full)
        return self._info(container_id, full)

    async def read_file(self, container_id: str, path: str) -> bytes:
        try:
            return self._files(container_id)[data_path(path)]
        except KeyError:
            raise InterpreterError(f"cannot read {data_path(path)}: no such file") from None

    async def delete_file(self, container_id: str, path: str) -> None:
        if self._files(container_id).pop(data_path(path), None) is None:
            raise InterpreterError(f"cannot delete {data_path(path)}: no such file")

    async def list_files(self, container_id: str) -> list[FileInfo]:
        return [self._info(container_id, p) for p in sorted(self._files(container_id))]


def echo_fields(**overrides: Any) -> ResponseEcho:
    """The response fields a service echoes from a request with every setting left at its default."""
    fields: ResponseEcho = {
        "model": "fake-model",
        "instructions": None,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "previous_response_id": None,
        "metadata": {},
        "background": False,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "user": None,
        "reasoning": None,
        "top_logprobs": 0,
        "service_tier": "default",
        "safety_identifier": None,
        "prompt_cache_key": None,
        "store": True,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    return cast(ResponseEcho, {**fields, **overrides})

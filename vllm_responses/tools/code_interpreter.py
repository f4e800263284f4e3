"""The code interpreter tool: its request checks, the response's container, and running the code the model writes.

The service checks the tool (`check_code_tool`) and makes the response's `CodeContainer` (`code_container`),
which the agent loop asks for its container id as a code call starts; each code call's own record
(`CodeCall`) holds its code as it streams, and `CodeRun` runs it, its results reaching the client as
`code_interpreter_call` outputs (`code_outputs`) and the model as text (`context.turns.code_result_text`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from interpreter_service import ContainerNotFound, ExecutionResult, Interpreter, InterpreterError
from vllm_responses.builder.citations import WrittenFile
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.images import code_result_images
from vllm_responses.context.turns import code_result_text
from vllm_responses.engine.parsers.partial_json import JsonStringField
from vllm_responses.engine.types import ToolCall, ToolResult, Turn
from vllm_responses.observe import metrics
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.items import CodeOutput
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.store.base import DEFAULT_PROJECT, StoredFile
from vllm_responses.tools.containers import ContainerService

__all__ = ["CodeCall", "CodeContainer", "CodeRun", "check_code_tool", "code_container", "code_outputs"]

logger = logging.getLogger(__name__)


def check_code_tool(req: CreateResponseRequest, interpreter: Interpreter | None) -> None:
    """A `code_interpreter` tool needs the server's interpreter: an `InvalidRequest` naming `tools` without one."""
    if req.code_tool is not None and interpreter is None:
        raise InvalidRequest(
            "The code_interpreter tool is disabled on this server.",
            param="tools",
            code="unsupported_value",
        )


async def code_container(
    req: CreateResponseRequest,
    containers: ContainerService,
    context: Sequence[Mapping[str, Any]],
    project: str = DEFAULT_PROJECT,
) -> CodeContainer:
    """The response's `CodeContainer`, its tool checked now, before the response starts: a container it names
    must be `project`'s (another's, or one gone: a 404 naming it), its `memory_limit` one the sandbox can grant
    and its `file_ids` files of the Files API, `project`'s (a 404 naming the id).

    With container "auto", the last code_interpreter_call in `context` (the model's items) names the container
    to reuse, whether it came through `previous_response_id` or was sent back as input (as agent SDKs do)."""
    tool = req.code_tool
    assert tool is not None
    named = tool.container if isinstance(tool.container, str) and tool.container != "auto" else None
    if named is not None:
        try:
            await containers.get(named, project)
        except ContainerNotFound as exc:
            raise NotFound(str(exc), param=f"tools[{req.tools.index(tool)}].container") from None
    earlier = next(
        (it.get("container_id") for it in reversed(context) if it.get("type") == "code_interpreter_call"),
        None,
    )
    memory = getattr(tool.container, "memory_limit", None)
    where = f"tools[{req.tools.index(tool)}].container"
    containers.check_memory_limit(memory, param=f"{where}.memory_limit")
    files = await _tool_files(tool.container, containers, project, f"{where}.file_ids")
    return CodeContainer(containers, project, named=named, earlier=earlier, memory_limit=memory, files=files)


class CodeContainer:
    """The container a response's code calls run in: chosen here, on the first code call's start, and
    pinned in the interpreter until the response ends (`release`), so that another response waiting for room
    cannot evict it between two of this response's code calls.

    The choice: the container the tool names (`named`); else (container "auto") the one the context's last
    code call ran in (`earlier`), while it lives, with the tool's `files` copied in where it has no file of
    that name yet; else a new one of `project`'s holding `files`, its worker coming in the background (the
    model's code streams meanwhile, its run waits for it). A container that cannot be had raises the
    interpreter's own errors (`errors.api_error` maps them). Made by `code_container`, which checks the tool.
    """

    def __init__(
        self,
        containers: ContainerService,
        project: str = DEFAULT_PROJECT,
        *,
        named: str | None = None,
        earlier: str | None = None,
        memory_limit: str | None = None,
        files: Sequence[StoredFile] = (),
    ) -> None:
        self.containers = containers
        self.project = project
        self.earlier = earlier
        self.memory_limit = memory_limit
        self.files = list(files)
        self._chosen: str | None = named or None  # once chosen, every later call's
        self._pinned: str | None = None  # kept from eviction until the response ends

    async def get(self) -> str:
        """The response's container id, chosen on first use, pinned in the interpreter until `release`."""
        container_id = await self._choose()
        interpreter = self.containers.interpreter
        if container_id != self._pinned and interpreter is not None:
            if self._pinned is not None:
                interpreter.unpin(self._pinned)
            interpreter.pin(container_id)
            self._pinned = container_id
        return container_id

    def release(self) -> None:
        """The response has ended: its container may be evicted again."""
        interpreter = self.containers.interpreter
        if self._pinned is not None and interpreter is not None:
            interpreter.unpin(self._pinned)
        self._pinned = None

    async def _choose(self) -> str:
        if self._chosen is not None:
            return self._chosen
        if self.earlier:
            try:
                await self.containers.get(self.earlier, self.project)
                await self.containers.copy_files(self.earlier, self.files, missing_only=True)
                self._chosen = self.earlier
                return str(self.earlier)
            except ContainerNotFound:
                pass
        info = await self.containers.create(
            memory_limit=self.memory_limit, project=self.project, wait_for_worker=False, files=self.files
        )
        self._chosen = info.id
        return info.id


@dataclass(eq=False)
class CodeCall:
    """A code interpreter call's own record, from its start to its run: its item (`index`, `item_id`), the
    container it runs in and the code as it streamed in, decoded from its `{"code": ...}` arguments. The loop
    runs it from here (`CodeRun.run`), never reading the code back from the builder.

    One kind of the agent loop's open calls (agent/open_calls.py): `delta` and `end` stream its code."""

    name: str
    index: int
    item_id: str
    container_id: str  # "" when no container could be had
    error: str | None = None  # then why: the model is told, as the call's output; the code never runs
    code: str = ""  # as streamed to the client so far
    arguments: str = field(default="", kw_only=True)  # the model's arguments so far (the tracker adds them)
    decoder: JsonStringField = field(default_factory=lambda: JsonStringField("code"), repr=False)

    def delta(self, builder: ResponseBuilder, arguments: str) -> list[Event]:
        return self._streamed(builder, self.decoder.feed(arguments))

    def end(self, builder: ResponseBuilder) -> list[Event]:
        return self._streamed(builder, self.decoder.finish()) + builder.calls.code_done(self.index)

    def _streamed(self, builder: ResponseBuilder, text: str) -> list[Event]:
        if not text:
            return []
        self.code += text
        return builder.calls.code_delta(self.index, text)


async def _tool_files(
    container: object, containers: ContainerService, project: str, param: str
) -> list[StoredFile]:
    """The files an `auto` container's `file_ids` name, `project`'s and live (a 404 naming `param[i]`)."""
    file_ids = getattr(container, "file_ids", None) or []
    if not file_ids:
        return []
    if containers.files_api is None:
        raise InvalidRequest("This server keeps no files.", param=param, code="unsupported_parameter")
    return await containers.files_api.get_all(list(file_ids), project, param)


def code_outputs(result: ExecutionResult) -> list[CodeOutput]:
    """A sandbox result as code_interpreter_call `outputs` (logs, then one image per figure)."""
    logs = result.logs
    if result.error and result.error_kind != "exception" and result.error not in logs:
        logs = f"{logs}\n{result.error}" if logs else result.error
    outputs: list[CodeOutput] = [{"type": "logs", "logs": logs}] if logs else []
    for png in result.images:
        outputs.append({"type": "image", "url": "data:image/png;base64," + base64.b64encode(png).decode()})
    return outputs


class CodeRun:
    """One response's code calls run in the interpreter (None: the server has none, each call's output says
    so); `timeout_s` bounds each code cell. Cancelling the response interrupts a running cell (its `execute`).
    """

    def __init__(self, interpreter: Interpreter | None, timeout_s: float | None) -> None:
        self.interpreter = interpreter
        self.timeout_s = timeout_s

    async def run(self, builder: ResponseBuilder, call: CodeCall, turns: list[Turn]) -> AsyncIterator[Event]:
        """Execute the finished code `call` (with its `error`, why it got no container, told to the model as
        its output instead), finish its item, and append the call and its result to `turns`."""
        interpreter = self.interpreter
        started = time.monotonic()
        try:
            if interpreter is None:
                raise InterpreterError("the code interpreter is not enabled on this server")
            if call.error is not None:  # no container could be had: the model is told so, as the output
                result = ExecutionResult(logs="", error=call.error, error_kind="crashed")
            else:
                result = await interpreter.execute(call.container_id, call.code, timeout_s=self.timeout_s)
        except asyncio.CancelledError:
            metrics.code_run("cancelled", time.monotonic() - started)
            raise
        except InterpreterError as exc:  # an error output the model sees, not a failed response
            result = ExecutionResult(logs="", error=f"Sandbox error: {exc}", error_kind="crashed")
        metrics.code_run(result.error_kind or "ok", time.monotonic() - started)
        if result.files_changed and interpreter is not None:
            builder.note_files(await _written_files(interpreter, call.container_id, result.files_changed))
        outputs = code_outputs(result)
        failed = result.error_kind not in (None, "exception")
        for ev in builder.calls.code_finished(call.index, outputs, failed=failed):
            yield ev
        turns.append(ToolCall(call.item_id, call.name, json.dumps({"code": call.code})))
        turns.append(
            ToolResult(call.item_id, call.name, code_result_text(outputs), code_result_images(outputs))
        )


async def _written_files(
    interpreter: Interpreter, container_id: str, paths: tuple[str, ...]
) -> list[WrittenFile]:
    """The container files (with their ids) at `paths`, which a code call just wrote."""
    try:
        infos = await interpreter.list_files(container_id)
    except InterpreterError as exc:
        logger.warning("could not list the files of container %s: %s", container_id, exc)
        return []
    changed = set(paths)
    return [WrittenFile(container_id, f.id, f.path) for f in infos if f.path in changed]

"""The code interpreter tool: its request checks, the response's container, and running the code the model writes.

The service checks the tool (`check_code_tool`) and makes the response's container resolver
(`container_resolver`); the agent loop runs each code call through `CodeRun`, whose results reach the client
as `code_interpreter_call` outputs (`code_outputs`) and the model as text (`context.turns.code_result_text`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from interpreter_service import ContainerNotFound, ExecutionResult, Interpreter, InterpreterError
from vllm_responses.builder.citations import WrittenFile
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.images import code_result_images
from vllm_responses.context.turns import code_result_text
from vllm_responses.engine.types import ToolCall, ToolResult, Turn
from vllm_responses.observe import metrics
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.items import CodeOutput
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.store.base import DEFAULT_PROJECT, StoredFile
from vllm_responses.tools.containers import ContainerService

__all__ = ["CodeRun", "check_code_tool", "code_outputs", "container_resolver"]

logger = logging.getLogger(__name__)


def check_code_tool(req: CreateResponseRequest, interpreter: Interpreter | None) -> None:
    """A `code_interpreter` tool needs the server's interpreter: an `InvalidRequest` naming `tools` without one."""
    if req.code_tool is not None and interpreter is None:
        raise InvalidRequest(
            "The code_interpreter tool is disabled on this server.",
            param="tools",
            code="unsupported_value",
        )


async def container_resolver(
    req: CreateResponseRequest,
    containers: ContainerService,
    context: Sequence[Mapping[str, Any]],
    project: str = DEFAULT_PROJECT,
) -> Callable[[], Awaitable[str]]:
    """A coroutine function giving the response's container id, created or reused on first use; every
    container it names or reuses must be `project`'s (another's is not found: a 404, or a new one made).

    With container "auto", the last code_interpreter_call in `context` (the model's items) names the container
    to reuse, whether it came through `previous_response_id` or was sent back as input (as agent SDKs do).
    Its `file_ids` (files of the Files API, `project`'s: a 404 naming the id now, else) are copied into the
    container it makes, and into a reused one that has no file of that name yet.
    A container that cannot be had raises the interpreter's own errors (`errors.api_error` maps them)."""
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
    chosen: list[str] = [named] if named else []

    async def resolve() -> str:
        if chosen:
            return chosen[0]
        if earlier:
            try:
                await containers.get(earlier, project)
                await containers.copy_files(earlier, files, missing_only=True)
                chosen.append(earlier)
                return str(earlier)
            except ContainerNotFound:
                pass
        # the worker comes in the background: the model's code streams meanwhile, its run waits for it
        info = await containers.create(
            memory_limit=memory, project=project, wait_for_worker=False, files=files
        )
        chosen.append(info.id)
        return info.id

    return resolve


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
    """One response's code interpreter in the agent loop: its container, pinned in the interpreter until the
    response ends, and the code calls run there.

    `container` is the response's container resolver (None: the response has no code interpreter);
    `timeout_s` bounds each code cell. Cancelling the response interrupts a running cell (its `execute`).
    """

    def __init__(
        self,
        interpreter: Interpreter | None,
        container: Callable[[], Awaitable[str]] | None,
        timeout_s: float | None,
    ) -> None:
        self.interpreter = interpreter
        self.resolver = container
        self.timeout_s = timeout_s
        self._pinned: str | None = None  # the container this response uses, kept from eviction until it ends

    async def container(self) -> str:
        """The response's container, pinned in the interpreter until `unpin`, so that another response
        waiting for room cannot evict it between two of this response's code calls."""
        assert self.resolver is not None
        container_id = await self.resolver()
        if container_id != self._pinned and self.interpreter is not None:
            if self._pinned is not None:
                self.interpreter.unpin(self._pinned)
            self.interpreter.pin(container_id)
            self._pinned = container_id
        return container_id

    def unpin(self) -> None:
        if self._pinned is not None and self.interpreter is not None:
            self.interpreter.unpin(self._pinned)
        self._pinned = None

    async def run(
        self, builder: ResponseBuilder, index: int, name: str, error: str | None, turns: list[Turn]
    ) -> AsyncIterator[Event]:
        """Execute the finished code call at output `index` (`error`: why it got no container, told to the
        model as its output instead), finish its item, and append the call and its result to `turns`."""
        item = builder.state.code_call(index)
        code, container_id = item["code"], item["container_id"]
        interpreter = self.interpreter
        started = time.monotonic()
        try:
            if interpreter is None:
                raise InterpreterError("the code interpreter is not enabled on this server")
            if error is not None:  # no container could be had: the model is told so, as the output
                result = ExecutionResult(logs="", error=error, error_kind="crashed")
            else:
                result = await interpreter.execute(container_id, code, timeout_s=self.timeout_s)
        except asyncio.CancelledError:
            metrics.code_run("cancelled", time.monotonic() - started)
            raise
        except InterpreterError as exc:  # an error output the model sees, not a failed response
            result = ExecutionResult(logs="", error=f"Sandbox error: {exc}", error_kind="crashed")
        metrics.code_run(result.error_kind or "ok", time.monotonic() - started)
        if result.files_changed and interpreter is not None:
            builder.note_files(await _written_files(interpreter, container_id, result.files_changed))
        outputs = code_outputs(result)
        for ev in builder.calls.code_finished(
            index, outputs, failed=result.error_kind not in (None, "exception")
        ):
            yield ev
        turns.append(ToolCall(item["id"], name, json.dumps({"code": code})))
        turns.append(ToolResult(item["id"], name, code_result_text(outputs), code_result_images(outputs)))


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

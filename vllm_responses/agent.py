"""The agent loop: call the model, run the code it writes in the sandbox, feed the output back, repeat."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from interpreter_service import ExecutionResult, Interpreter, InterpreterError
from vllm_responses.chat import (
    Finish,
    GenerateRequest,
    ReasoningDelta,
    Sampling,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    ToolResult,
    ToolSpec,
    Turn,
    Usage,
)
from vllm_responses.citations import WrittenFile
from vllm_responses.engine.base import Engine, EngineError
from vllm_responses.errors import api_error, failure_code
from vllm_responses.history import code_outputs, code_result_text
from vllm_responses.parsers.partial_json import JsonStringField
from vllm_responses.stream import ResponseBuilder

__all__ = ["AgentPlan", "run_agent"]

logger = logging.getLogger(__name__)
Event = dict[str, Any]


@dataclass
class AgentPlan:
    """Everything one response's loop needs, resolved from the request by the service."""

    turns: list[Turn]
    tools: tuple[ToolSpec, ...]
    tool_choice: ToolChoice
    parallel_tool_calls: bool
    sampling: Sampling
    max_output_tokens: int | None
    max_tool_calls: int | None
    max_turns: int
    code_timeout_s: float | None
    # Returns the container id for code calls (creating one on first use).
    container: Callable[[], Awaitable[str]] | None = None
    structured: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


@dataclass
class _Call:
    index: int  # output_index of the item
    name: str
    code: JsonStringField | None = None  # set for code-interpreter calls
    arguments: str = ""


async def run_agent(
    plan: AgentPlan, builder: ResponseBuilder, engine: Engine, interpreter: Interpreter | None, request_id: str
) -> AsyncIterator[Event]:
    """Yield the response's stream events, ending with completed / incomplete / failed.

    Cancellation (client gone, `cancel`) propagates: the engine request is aborted by closing its
    stream and a running code cell is interrupted by cancelling `execute`.
    """
    for ev in builder.created():
        yield ev
    code_names = {t.name for t in plan.tools if t.code_interpreter}
    tool_calls = 0
    try:
        for turn_no in range(plan.max_turns):
            budget = None
            if plan.max_output_tokens is not None:
                budget = plan.max_output_tokens - plan.usage.output_tokens
                if budget <= 0:
                    for ev in builder.incomplete("max_output_tokens", plan.usage):
                        yield ev
                    return
            tools_left = plan.max_tool_calls is None or tool_calls < plan.max_tool_calls
            use_tools = bool(plan.tools) and tools_left and turn_no < plan.max_turns - 1
            choice: ToolChoice = plan.tool_choice if turn_no == 0 else "auto"
            if choice == "none":
                use_tools = False
            sampling = plan.sampling
            structured = plan.structured[min(turn_no, len(plan.structured) - 1)] if plan.structured else None
            sampling = Sampling(
                max_tokens=budget,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                text_format=None if use_tools else sampling.text_format,
                structured=structured,
                seed=sampling.seed,
            )
            request = GenerateRequest(
                request_id=f"{request_id}-{turn_no}",
                turns=tuple(plan.turns),
                tools=plan.tools if use_tools else (),
                tool_choice=choice if use_tools else "none",
                parallel_tool_calls=plan.parallel_tool_calls,
                sampling=sampling,
            )
            calls: dict[int, _Call] = {}
            code_calls: list[_Call] = []
            function_calls = 0
            finish: Finish | None = None
            async with aclosing(engine.generate(request)) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        if event.text:
                            for ev in builder.text_delta(event.text):
                                yield ev
                    elif isinstance(event, ReasoningDelta):
                        if event.text:
                            for ev in builder.reasoning_delta(event.text):
                                yield ev
                    elif isinstance(event, ToolCallStart):
                        if not request.tools:
                            logger.warning("dropping a call to %r: no tools were offered", event.name)
                            continue
                        if event.name in code_names and plan.container is not None:
                            try:
                                container_id = await plan.container()
                            except InterpreterError as exc:
                                raise EngineError(f"No code interpreter container is available: {exc}") from exc
                            index, events = builder.code_start(container_id)
                            calls[event.index] = _Call(index, event.name, code=JsonStringField("code"))
                        else:
                            index, events = builder.function_call_start(event.name)
                            calls[event.index] = _Call(index, event.name)
                        for ev in events:
                            yield ev
                    elif isinstance(event, ToolCallDelta):
                        call = calls.get(event.index)
                        if call is None:
                            continue
                        call.arguments += event.arguments
                        if call.code is not None:
                            text = call.code.feed(event.arguments)
                            events = builder.code_delta(call.index, text) if text else []
                        else:
                            events = builder.function_call_delta(call.index, event.arguments)
                        for ev in events:
                            yield ev
                    elif isinstance(event, ToolCallEnd):
                        call = calls.get(event.index)
                        if call is None:
                            continue
                        for ev in _end_call(builder, call):
                            yield ev
                        if call.code is not None:
                            code_calls.append(call)
                        else:
                            function_calls += 1
                    elif isinstance(event, Finish):
                        finish = event
            if finish is None:
                raise EngineError("the engine stream ended without a finish event")
            plan.usage = plan.usage + finish.usage
            # Calls the parser opened but never closed (output cut off) are closed here.
            for call in calls.values():
                if builder.output[call.index]["status"] == "in_progress":
                    for ev in _end_call(builder, call):
                        yield ev
                    if call.code is not None:
                        code_calls.append(call)
                    else:
                        function_calls += 1
            if finish.reason == "length" and not code_calls:
                # `incomplete` closes an open message as incomplete too.
                for ev in builder.incomplete("max_output_tokens", plan.usage):
                    yield ev
                return
            # A message closed with no code left to run is the response's last: it cites every file.
            for ev in builder.close_open(final=bool(function_calls) or not code_calls):
                yield ev
            for call in code_calls:
                async for ev in _run_code(plan, builder, interpreter, call):
                    yield ev
            tool_calls += len(code_calls) + function_calls
            if function_calls or not code_calls:
                for ev in builder.completed(plan.usage):
                    yield ev
                return
    except EngineError as exc:
        logger.warning("response %s failed in the engine: %s", builder.id, exc.message)
        err = api_error(exc)
        builder.failure_status, builder.failure_code = err.status, err.code
        for ev in builder.failed(exc.message, plan.usage, code=failure_code(err)):
            yield ev


async def _run_code(
    plan: AgentPlan, builder: ResponseBuilder, interpreter: Interpreter | None, call: _Call
) -> AsyncIterator[Event]:
    """Execute one finished code call, finish its item, and append the call and its result to the turns."""
    item = builder.output[call.index]
    code = item["code"]
    try:
        if interpreter is None:
            raise InterpreterError("the code interpreter is not enabled on this server")
        result = await interpreter.execute(item["container_id"], code, timeout_s=plan.code_timeout_s)
    except asyncio.CancelledError:
        raise
    except InterpreterError as exc:
        result = ExecutionResult(logs="", error=f"Sandbox error: {exc}", error_kind="crashed")
    if result.files_changed and interpreter is not None:
        builder.note_files(await _written_files(interpreter, item["container_id"], result.files_changed))
    failed = result.error_kind not in (None, "exception")
    outputs = code_outputs(result)
    for ev in builder.code_finished(call.index, outputs, failed=failed):
        yield ev
    plan.turns.append(ToolCall(item["id"], call.name, json.dumps({"code": code})))
    plan.turns.append(ToolResult(item["id"], call.name, code_result_text(outputs)))


async def _written_files(interpreter: Interpreter, container_id: str, paths: tuple[str, ...]) -> list[WrittenFile]:
    """The container files (with their ids) at `paths`, which a code call just wrote."""
    try:
        infos = await interpreter.list_files(container_id)
    except InterpreterError as exc:
        logger.warning("could not list the files of container %s: %s", container_id, exc)
        return []
    changed = set(paths)
    return [WrittenFile(container_id, f.id, f.path) for f in infos if f.path in changed]


def _end_call(builder: ResponseBuilder, call: _Call) -> list[Event]:
    """Events that finish a call's item once its arguments are complete (code: the rest of the code)."""
    if call.code is not None:
        rest = call.code.finish()
        return (builder.code_delta(call.index, rest) if rest else []) + builder.code_done(call.index)
    return builder.function_call_done(call.index, _normalize_args(call.arguments))


def _normalize_args(arguments: str) -> str:
    """Arguments as compact JSON object text when they parse; as given otherwise."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(value) if isinstance(value, dict) else arguments

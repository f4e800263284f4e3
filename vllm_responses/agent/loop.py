"""The agent loop: call the model, run the code it writes in the sandbox, feed the output back, repeat."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from interpreter_service import Interpreter
from vllm_responses.agent.open_calls import CallTracker
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.compaction import compact_loop
from vllm_responses.context.reasoning_summary import needs_summary, summarise_reasoning
from vllm_responses.context.truncation import fit_loop
from vllm_responses.engine.base import Engine, EngineError
from vllm_responses.engine.types import (
    Finish,
    GenerateRequest,
    Message,
    Reasoning,
    ReasoningDelta,
    Sampling,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    ToolSpec,
    Turn,
    Usage,
)
from vllm_responses.errors import DOMAIN_ERRORS, api_error, failure_code
from vllm_responses.protocol.compaction import ContextManagement
from vllm_responses.protocol.errors import APIError
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.items import CompactionItem
from vllm_responses.tools.code_interpreter import CodeContainer, CodeRun
from vllm_responses.tools.file_search import FileSearchPlan, FileSearchRun
from vllm_responses.tools.mcp import McpPlan, McpRun
from vllm_responses.tools.tool_search import DeferredTool, ToolSearch
from vllm_responses.tools.web_search import SearchPlan, SearchRun

__all__ = ["AgentLoop", "AgentPlan"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentPlan:
    """Everything one response's loop needs, resolved from the request by the service (input only)."""

    turns: tuple[Turn, ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: ToolChoice
    parallel_tool_calls: bool
    sampling: Sampling
    max_output_tokens: int | None
    max_tool_calls: int | None
    max_turns: int
    code_timeout_s: float | None
    # The container the code calls run in (chosen on first use, pinned until the response ends); None: the
    # response has no code interpreter.
    container: CodeContainer | None = None
    # One structured-output constraint per model call (the last one repeats); empty: none.
    structured: tuple[dict[str, Any], ...] = ()
    # The compaction item of a context compacted before the loop (`context_management`), and what the
    # summarising call cost: the item opens the output, the cost counts in the response's usage.
    compaction: CompactionItem | None = None
    compaction_usage: Usage = Usage()
    # Remote MCP tools (tools/mcp.py): listed, offered and run by the loop; None without any.
    mcp: McpPlan | None = None
    # Web searches (tools/web_search.py): None when the tool is not offered.
    search: SearchPlan | None = None
    # File searches (tools/file_search.py): None without a `file_search` tool (or where it is not offered).
    file_search: FileSearchPlan | None = None
    # The search of deferred tools (tools/tool_search.py): None without a `tool_search` tool.
    tool_search: ToolSearch | None = None
    # `truncation: "auto"`: every later model call is fitted to the context window too (`fit_loop`).
    truncate: bool = False
    # `context_management`: a later model call past its threshold has the loop's older steps summarised.
    context_management: ContextManagement | None = None
    # `reasoning.effort`, for every model call (the engine hands it to a template that takes it).
    reasoning_effort: str | None = None
    # `text.verbosity`, for every model call (a template variable, or a note in the system turn).
    verbosity: str | None = None
    # `reasoning.summary: "concise"`: reasoning longer than this (characters) is summarised by a call of its own.
    concise_summary_over: int = 600


@dataclass
class Finished:
    """Set by `AgentLoop._after_model_call` when the response has ended."""

    done: bool = False


class AgentLoop:
    """One response's loop. `events()` yields its stream events, ending with completed / incomplete / failed;
    meanwhile `usage`, `turns` and `failure` are the loop's own running result.

    Cancellation (client gone, `cancel`) propagates: the engine request is aborted by closing its stream
    and a running code cell is interrupted by cancelling `execute`.
    """

    def __init__(
        self,
        plan: AgentPlan,
        builder: ResponseBuilder,
        engine: Engine,
        interpreter: Interpreter | None,
        request_id: str,
    ) -> None:
        self.plan = plan
        self.builder = builder
        self.engine = engine
        self.request_id = request_id
        self.usage = Usage()
        self.turns: list[Turn] = list(plan.turns)
        self.tool_calls = 0
        self.model_calls = 0
        self.failure: APIError | None = None  # set when the response failed
        self._code_names = frozenset(t.name for t in plan.tools if t.code_interpreter)
        self._client_tools = {
            t.name: t
            for t in plan.tools
            if not (t.code_interpreter or t.web_search or t.tool_search or t.file_search)
        }
        self._search_names = frozenset(t.name for t in plan.tools if t.web_search)
        self.search = SearchRun(plan.search) if plan.search is not None else None
        self.file_search = FileSearchRun(plan.file_search) if plan.file_search is not None else None
        self.code = CodeRun(interpreter, plan.code_timeout_s)
        self.mcp = McpRun(plan.mcp) if plan.mcp is not None else None
        self.tools = plan.tools  # and, once listed, the MCP tools

    async def events(self) -> AsyncIterator[Event]:
        try:
            async with aclosing(self._events()) as events:
                async for ev in events:
                    yield ev
        finally:
            if self.plan.container is not None:
                self.plan.container.release()

    async def _events(self) -> AsyncGenerator[Event, None]:
        builder = self.builder
        for ev in builder.created():
            yield ev
        if self.plan.compaction is not None:
            self.usage = self.usage + self.plan.compaction_usage
            for ev in builder.compaction(self.plan.compaction):
                yield ev
        try:
            if self.mcp is not None:  # the servers' tools listed, and the calls the client approved run
                async for ev in self.mcp.prepare(builder, {t.name for t in self.tools}, self.turns):
                    yield ev
                self.tools = (*self.plan.tools, *self.mcp.specs)
                self.tool_calls += len(self.mcp.plan.approved)
            for turn_no in range(self.plan.max_turns):
                request = await self._fitted_request(turn_no)
                if request is None:  # no output tokens left
                    for ev in builder.incomplete("max_output_tokens", self.usage):
                        yield ev
                    return
                tracker = self._tracker()
                async for ev in self._call_model(request, tracker):
                    yield ev
                finished = Finished()
                async for ev in self._after_model_call(tracker, finished):
                    yield ev
                if finished.done:
                    return
        except DOMAIN_ERRORS as exc:
            self.failure = api_error(exc)
            logger.warning("response %s failed: %s", builder.id, self.failure.message)
            for ev in builder.failed(self.failure.message, self.usage, code=failure_code(self.failure)):
                yield ev

    async def _fitted_request(self, turn_no: int) -> GenerateRequest | None:
        """Model call `turn_no` (None: no output tokens left). A later call of the loop is compacted past the
        `context_management` threshold and, with `truncation: "auto"`, fitted to the context window, as the
        first call was before the response began."""
        request = self._request(turn_no)
        entry = self.plan.context_management
        if request is not None and turn_no > 0 and entry is not None:
            compacted = await compact_loop(self.engine, entry, request)
            if compacted is not None:  # the loop goes on from the summary (its cost counts as usage)
                self.turns, used = list(compacted[0]), compacted[1]
                self.usage = self.usage + used
                request = self._request(turn_no)
        if request is not None and turn_no > 0 and self.plan.truncate:
            fitted = await fit_loop(self.engine, request, request.sampling.max_tokens)
            request = replace(request, turns=fitted)
        return request

    def _tracker(self) -> CallTracker:
        """The call tracker of one model call: which of the tools offered the server runs, and how."""
        return CallTracker(
            self.builder,
            self._code_names,
            self.plan.container,
            self._client_tools,
            self.mcp.routes if self.mcp is not None else None,
            self._search_names if self.search is not None else frozenset(),
            self.plan.tool_search.execution if self.plan.tool_search is not None else None,
            self.file_search is not None,
        )

    async def _after_model_call(self, tracker: CallTracker, finished: Finished) -> AsyncIterator[Event]:
        """What follows a model call: the response ends (`finished.done`: cut by the budget, or no call the
        server runs is left), or the calls the server runs are run and their results fed to the next call."""
        builder = self.builder
        code_calls, function_calls = tracker.code_calls, tracker.function_calls
        mcp_calls, approvals = tracker.mcp_calls, tracker.approval_requests
        searches, finds, file_searches = tracker.search_calls, tracker.tool_searches, tracker.file_searches
        server_run = bool(code_calls or mcp_calls or searches or finds or file_searches)
        if tracker.finish_reason == "length" and not server_run:
            finished.done = True  # `incomplete` closes an open message as incomplete too
            for ev in builder.incomplete("max_output_tokens", self.usage):
                yield ev
            return
        # A message closed with no call left to run is the response's last: it cites every file. Calls the
        # client answers (function, custom, coding, MCP approval) end the response too.
        last = bool(function_calls or approvals) or not server_run
        for ev in builder.text.close(final=last):
            yield ev
        for code in code_calls:
            async for ev in self.code.run(builder, code, self.turns):
                yield ev
        for mcp_call in mcp_calls:
            assert self.mcp is not None
            async for ev in self.mcp.run(builder, mcp_call.index, self.turns):
                yield ev
        for search in searches:
            assert self.search is not None
            async for ev in self.search.run(builder, search.index, search.name, search.arguments, self.turns):
                yield ev
        for file_search in file_searches:
            assert self.file_search is not None
            async for ev in self.file_search.run(
                builder, file_search.index, file_search.arguments, self.turns
            ):
                yield ev
        for find in finds:
            async for ev in self._find_tools(find.arguments):
                yield ev
        self.tool_calls += len(code_calls) + len(function_calls) + len(mcp_calls) + len(approvals)
        self.tool_calls += len(searches) + len(finds) + len(file_searches)
        if last:
            finished.done = True
            for ev in builder.completed(self.usage):
                yield ev

    async def _find_tools(self, arguments: str) -> AsyncIterator[Event]:
        """A server-run tool search: its items, and the tools it found offered from the next model call on."""
        assert self.plan.tool_search is not None
        async for out in self.plan.tool_search.run(self.builder, arguments, self.turns):
            if isinstance(out, DeferredTool):
                if all(t.name != out.spec.name for t in self.tools):
                    self.tools = (*self.tools, out.spec)
                    self._client_tools[out.spec.name] = out.spec
            else:
                yield out

    def upfront_requests(self) -> list[GenerateRequest]:
        """What `Engine.precheck` checks before the response starts: the first model call as it will be made,
        and that call with each output constraint only a later call carries (a later `structured` entry;
        `text.format` alone, as a call offered no tools carries it), so that a bad one is refused now, not
        mid-stream."""
        first = self._request(0)
        if first is None:
            return []
        checks = [first]
        sampling = first.sampling
        for structured in {json.dumps(s, sort_keys=True): s for s in self.plan.structured[1:]}.values():
            if structured != sampling.structured:
                checks.append(replace(first, sampling=replace(sampling, structured=structured)))
        text_format = self.plan.sampling.text_format
        if text_format and first.tools and not self.plan.structured:
            checks.append(
                replace(
                    first, tools=(), tool_choice="none", sampling=replace(sampling, text_format=text_format)
                )
            )
        return checks

    def _request(self, turn_no: int) -> GenerateRequest | None:
        """The model call number `turn_no`, or None when the output token budget is spent."""
        plan = self.plan
        budget = None
        if plan.max_output_tokens is not None:
            budget = plan.max_output_tokens - self.usage.output_tokens
            if budget <= 0:
                return None
        left = None if plan.max_tool_calls is None else plan.max_tool_calls - self.tool_calls
        tools_left = left is None or left > 0
        # One call left under `max_tool_calls`: this model call makes at most one (the engine cuts the rest).
        parallel = plan.parallel_tool_calls and (left is None or left > 1)
        choice: ToolChoice = plan.tool_choice if turn_no == 0 else "auto"
        tools = self.tools
        if turn_no == 0 and self.mcp is not None and self.mcp.ready:  # a tool_choice naming an MCP tool
            tools, choice = self.mcp.first_choice(tools, choice)
        use_tools = bool(tools) and tools_left and turn_no < plan.max_turns - 1 and choice != "none"
        structured = plan.structured[min(turn_no, len(plan.structured) - 1)] if plan.structured else None
        # `text.format` rides on every call: beside tools the engine holds the answer to it (calls or the JSON).
        sampling = replace(plan.sampling, max_tokens=budget, structured=structured)
        return GenerateRequest(
            request_id=f"{self.request_id}-{turn_no}",
            turns=tuple(self.turns),
            tools=tools if use_tools else (),
            tool_choice=choice if use_tools else "none",
            parallel_tool_calls=parallel,
            sampling=sampling,
            reasoning_effort=plan.reasoning_effort,
            verbosity=plan.verbosity,
        )

    async def _concise_summary(self) -> None:
        """`reasoning.summary: "concise"`: the open reasoning, when long, summarised by the served model in a
        call of its own (counted in the usage) before the item closes (context/reasoning_summary.py)."""
        reasoning = self.builder.text.unsummarised()
        if reasoning is None or not needs_summary(reasoning, self.plan.concise_summary_over):
            return
        summary, usage = await summarise_reasoning(self.engine, reasoning, self.request_id)
        self.usage = self.usage + usage
        self.builder.text.summarise(summary)

    async def _call_model(self, request: GenerateRequest, tracker: CallTracker) -> AsyncIterator[Event]:
        """Stream one model call into events; how it finished and the calls it made are left on `tracker`. Its
        reasoning and its text are kept as turns, before the calls it made, for the loop's next model call (as
        its items read when they are given back: context/turns.py)."""
        builder = self.builder
        finish: Finish | None = None
        thought: list[str] = []
        said: list[str] = []
        self.model_calls += 1
        async with aclosing(self.engine.generate(request)) as stream:
            async for event in stream:
                if not isinstance(event, ReasoningDelta):  # the open reasoning ends here
                    await self._concise_summary()
                if isinstance(event, TextDelta):
                    said.append(event.text)
                    events = builder.text.text_delta(event.text, event.logprobs) if event.text else []
                elif isinstance(event, ReasoningDelta):
                    thought.append(event.text)
                    events = builder.text.reasoning_delta(event.text) if event.text else []
                elif isinstance(event, ToolCallStart):
                    if not request.tools:
                        logger.warning("dropping a call to %r: no tools were offered", event.name)
                        continue
                    events = await tracker.start(event)
                elif isinstance(event, ToolCallDelta):
                    events = tracker.delta(event)
                elif isinstance(event, ToolCallEnd):
                    events = tracker.end(event.index)
                else:
                    finish = event
                    continue
                for ev in events:
                    yield ev
        if finish is None:
            raise EngineError("the engine stream ended without a finish event")
        await self._concise_summary()
        if "".join(thought).strip():
            self.turns.append(Reasoning("".join(thought)))
        if "".join(said).strip():
            self.turns.append(Message("assistant", "".join(said)))
        self.usage = self.usage + finish.usage
        for ev in tracker.close_dangling():
            yield ev
        tracker.finish_reason = finish.reason

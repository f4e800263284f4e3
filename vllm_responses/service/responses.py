"""The responses service: turns a validated request into a running response, and keeps, finds and cancels them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from interpreter_service import ContainerNotFound, Interpreter
from vllm_responses.agent.loop import AgentLoop, AgentPlan
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.config import Config
from vllm_responses.context.compaction import Compaction, compact, compact_over_threshold
from vllm_responses.context.references import check_call_outputs, resolve_stored_items
from vllm_responses.context.truncation import fit_context
from vllm_responses.context.turns import input_to_items, items_to_turns
from vllm_responses.engine.base import Engine
from vllm_responses.engine.types import (
    GenerateRequest,
    Message,
    ToolSpec,
    Turn,
    Usage,
    code_tool_spec,
)
from vllm_responses.protocol.errors import Conflict, InvalidRequest, NotFound
from vllm_responses.protocol.items import ResponseObject, wire_items
from vllm_responses.protocol.requests import (
    CreateResponseRequest,
    ToolChoiceAllowed,
)
from vllm_responses.protocol.status import UNFINISHED, ResponseStatus
from vllm_responses.runs.records import response_record
from vllm_responses.runs.replicas import Replica
from vllm_responses.runs.run import Run
from vllm_responses.service.admission import Admission, default_max_queued
from vllm_responses.service.conversations import ConversationService
from vllm_responses.service.driver import RunDriver, no_generation
from vllm_responses.service.echo import response_echo
from vllm_responses.service.sampling import engine_tool_choice, max_output_tokens, request_sampling
from vllm_responses.store.responses import ResponseStore, StoredResponse
from vllm_responses.tools.containers import ContainerService
from vllm_responses.tools.functions import check_grammar, custom_tool_spec
from vllm_responses.tools.mcp import check_mcp_request, mcp_plan

__all__ = ["ResponsesService"]

_LISTED_WITH_STATUS = ("custom_tool_call", "custom_tool_call_output")

logger = logging.getLogger(__name__)


class ResponsesService:
    def __init__(
        self, config: Config, engine: Engine, interpreter: Interpreter | None, store: ResponseStore
    ) -> None:
        self.config = config
        self.engine = engine
        self.interpreter = interpreter
        self.store = store
        self.containers = ContainerService(interpreter)
        self.conversations = ConversationService(store)
        self.runs: dict[str, Run] = {}
        self.driver = RunDriver(store, self.conversations, self.runs)
        # --- replicas (issue 18) ---
        self.replica = Replica(
            store,
            self.runs,
            replica_id=config.replica_id,
            heartbeat_s=config.replica_heartbeat,
            lease_s=config.replica_lease,
        )
        # --- admission (issue 16) ---
        running = config.max_concurrent_responses or engine.max_num_seqs
        queued = config.max_queued_responses
        self.admission = Admission(running, default_max_queued(running) if queued is None else queued)

    @property
    def model_names(self) -> tuple[str, ...]:
        return self.config.served_model_names or (self.engine.model_name,)

    # --- create ---------------------------------------------------------------------------------------

    async def _conversation(
        self, req: CreateResponseRequest, local: ResponseStore | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Turn], list[ToolSpec]]:
        """The stored history, the input as items, the turns the model sees and the tools it is offered
        (`local`: see `create`)."""
        if req.model not in self.model_names:
            raise NotFound(
                f"The model {req.model!r} does not exist; this server serves {', '.join(self.model_names)}.",
                param="model",
                code="model_not_found",
            )
        history: list[dict[str, Any]] = []
        if req.previous_response_id:
            prev = await self._previous(req.previous_response_id, local)
            history = prev.history
        elif req.conversation:
            history = await self.conversations.history(req.conversation)
        input_items = await resolve_stored_items(self.store, input_to_items(req.input), "input")
        check_call_outputs(history, input_items)
        check_mcp_request(req, [*history, *input_items], input_items, self.config.mcp_allowed_urls)
        code_tool = req.code_tool
        if code_tool is not None and self.interpreter is None:
            raise InvalidRequest(
                "The code_interpreter tool is disabled on this server.",
                param="tools",
                code="unsupported_value",
            )
        turns = _turns(req, [*history, *input_items])
        tools: list[ToolSpec] = [code_tool_spec()] if code_tool is not None else []
        tools += [
            ToolSpec(
                t.name,
                t.description or "",
                t.parameters or {"type": "object", "properties": {}},
                strict=bool(t.strict),
            )
            for t in req.function_tools
        ]
        for i, tool in enumerate(req.tools):  # --- custom tools (issue 17) ---
            if tool.type == "custom":
                check_grammar(tool, f"tools[{i}]")
                tools.append(custom_tool_spec(tool))
        if isinstance(req.tool_choice, ToolChoiceAllowed):  # only the allowed tools are offered
            allowed = req.tool_choice
            tools = [
                t
                for t in tools
                if allowed.allows(t.name, code_interpreter=t.code_interpreter, custom=t.custom)
            ]
        if req.truncation == "auto":  # the oldest turns dropped to fit the context window
            first = self._first_call(req, turns, tools)
            budget = max_output_tokens(req, self.engine.default_sampling)
            turns = list(await fit_context(self.engine, first, budget))
        return history, input_items, turns, tools

    async def count_input_tokens(self, req: CreateResponseRequest) -> int:
        """Prompt tokens of the response's first model call, rendered as `create` would render it."""
        _history, _items, turns, tools = await self._conversation(req)
        return await self.engine.count_tokens(self._first_call(req, turns, tools))

    def _first_call(
        self, req: CreateResponseRequest, turns: list[Turn], tools: list[ToolSpec]
    ) -> GenerateRequest:
        """The response's first model call as far as its prompt goes (what `count_tokens` renders)."""
        choice = engine_tool_choice(req.tool_choice)
        offered = bool(tools) and choice != "none" and self.config.max_turns > 1
        return GenerateRequest(
            request_id="input-tokens",
            turns=tuple(turns),
            tools=tuple(tools) if offered else (),
            tool_choice=choice if offered else "none",
            parallel_tool_calls=req.parallel_tool_calls,
        )

    async def compact(self, req: CreateResponseRequest) -> Compaction:
        """`POST /v1/responses/compact`: the request's context (history and input) compacted (compaction.py)."""
        self.admission.refuse_if_full()
        history, input_items, _turns, _tools = await self._conversation(req)
        forced = req.structured_outputs  # vendor extension: forces the summary
        first = (forced[0] if forced else None) if isinstance(forced, list) else forced
        slot = await self.admission.acquire()  # a model call: it takes a slot as a response does
        try:
            return await compact(self.engine, [*history, *input_items], structured=first)
        finally:
            slot.release()

    async def create(
        self, req: CreateResponseRequest, *, local: ResponseStore | None = None, generate: bool = True
    ) -> Run:
        """Start a response. `local` is a connection-local cache (WebSocket mode): `previous_response_id` is
        looked up there before the store, and the finished response is kept there whatever `store` says.
        `generate=False` prepares the conversation without calling the model: the response completes with
        no output, and its id can be continued from (a WebSocket warm-up).

        A response that calls the model is admitted (`admission`: it may wait for a slot, or get a 429) once
        its first model call passed the engine's up-front checks (else a 4xx); it holds its slot until its
        run ends (a compaction takes it first: its summary is a model call). Its first events are then ready."""
        if generate:
            self.admission.refuse_if_full()  # before any work is spent on a request refused anyway
        history, input_items, turns, tools = await self._conversation(req, local)
        context = [*history, *input_items]
        slot = await self.admission.acquire() if generate and req.context_management else None
        try:
            compacted: Compaction | None = None
            if req.context_management:  # compaction once the context passes the threshold (compaction.py)
                compacted = await compact_over_threshold(
                    self.engine, req.context_management[0], context, self._first_call(req, turns, tools)
                )
                if compacted is not None:
                    context, turns = compacted.items, _turns(req, compacted.items)
            code_tool = req.code_tool
            fmt = req.text.format if req.text and req.text.format else None
            text_format = None
            if fmt is not None and fmt.type != "text":
                text_format = fmt.model_dump(mode="json", by_alias=True, exclude_none=True)
            structured = req.structured_outputs
            container = await self._container_resolver(req, [*history, *input_items]) if code_tool else None
            builder = ResponseBuilder(
                response_echo(req, self.model_names[0], self.engine.default_sampling),
                include_outputs=req.wants_outputs,
                include_reasoning=req.wants_reasoning,
            )
            plan = AgentPlan(
                turns=tuple(turns),
                tools=tuple(tools),
                tool_choice=engine_tool_choice(req.tool_choice),
                parallel_tool_calls=req.parallel_tool_calls,
                sampling=request_sampling(req, text_format),
                max_output_tokens=max_output_tokens(req, self.engine.default_sampling),
                max_tool_calls=req.max_tool_calls,
                max_turns=self.config.max_turns,
                code_timeout_s=self.config.code_interpreter_timeout,
                container=container,
                structured=(structured,) if isinstance(structured, dict) else tuple(structured or ()),
                compaction=compacted.item if compacted is not None else None,
                compaction_usage=compacted.usage if compacted is not None else Usage(),
                mcp=mcp_plan(req, [*history, *input_items], self.config.mcp_timeout),
            )
            run = Run(builder, background=req.background)
            loop = AgentLoop(plan, builder, self.engine, self.interpreter, run.id)
            for call in loop.upfront_requests() if generate else ():  # refused now: a 4xx, not a stream
                await self.engine.precheck(call)
            if generate and slot is None:
                slot = await self.admission.acquire()
        except BaseException:
            if slot is not None:
                slot.release()
            raise
        self.runs[run.id] = run
        events = loop.events() if generate else no_generation(builder)
        acknowledged = None
        # Kept as acknowledged: after a crash it is found (failed), not 404; on a shared store a foreground
        # one too, so that other replicas see it running (its first event waits for that write, not the
        # client's answer).
        if req.store and (req.background or self.store.shared):
            acknowledged = asyncio.ensure_future(
                self._acknowledge(response_record(run, req.wants_outputs, context, input_items))
            )
        run.task = asyncio.create_task(
            self.driver.drive(run, loop, events, req, context, input_items, local, acknowledged),
            name=f"response {run.id}",
        )
        if slot is not None:  # given back when the run ends, however it ends (even cancelled before it ran)
            held = slot
            run.task.add_done_callback(lambda _task: held.release())
        if acknowledged is not None:
            run.task.add_done_callback(lambda _task: self.replica.release_soon(run.id))
            if req.background:  # its answer says it is kept
                await asyncio.shield(acknowledged)
        return run

    async def _acknowledge(self, record: StoredResponse) -> None:
        """A stored response's first record (background, or any on a shared store), leased to this replica first
        (replicas.py): a failure is logged, not raised (the response runs; without its lease another
        replica's sweep ends it failed)."""
        try:
            await self.replica.hold(record.id)
        except Exception:
            logger.exception("could not lease response %s", record.id)
        await self.driver.save(record)

    async def _previous(self, response_id: str, local: ResponseStore | None = None) -> StoredResponse:
        live = self.runs.get(response_id)
        if live is not None and not live.done.is_set():
            raise InvalidRequest(
                f"Previous response {response_id!r} is still in progress.", param="previous_response_id"
            )
        prev = await local.get(response_id) if local is not None else None
        if prev is None:
            prev = await self.store.get(response_id)
        if prev is None:
            raise NotFound(
                f"Previous response with id {response_id!r} not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        if prev.response.get("status") in UNFINISHED:  # running on another replica
            raise InvalidRequest(
                f"Previous response {response_id!r} is still in progress.", param="previous_response_id"
            )
        return prev

    async def _container_resolver(
        self, req: CreateResponseRequest, history: list[dict[str, Any]]
    ) -> Callable[[], Awaitable[str]]:
        """A coroutine function giving this response's container id, created or reused on first use.

        With container "auto", the last code_interpreter_call in the model's context names the container to
        reuse, whether it came through `previous_response_id` or was sent back as input (as agent SDKs do).
        A container that cannot be had raises the interpreter's own errors (`errors.api_error` maps them)."""
        tool = req.code_tool
        assert tool is not None
        containers = self.containers
        named = tool.container if isinstance(tool.container, str) and tool.container != "auto" else None
        if named is not None:
            try:
                await containers.get(named)
            except ContainerNotFound as exc:
                raise NotFound(str(exc), param=f"tools[{req.tools.index(tool)}].container") from None
        earlier = next(
            (it.get("container_id") for it in reversed(history) if it.get("type") == "code_interpreter_call"),
            None,
        )
        memory = getattr(tool.container, "memory_limit", None)
        containers.check_memory_limit(memory, param=f"tools[{req.tools.index(tool)}].container.memory_limit")
        chosen: list[str] = [named] if named else []

        async def resolve() -> str:
            if chosen:
                return chosen[0]
            if earlier:
                try:
                    await containers.get(earlier)
                    chosen.append(earlier)
                    return str(earlier)
                except ContainerNotFound:
                    pass
            info = await containers.create(memory_limit=memory)
            chosen.append(info.id)
            return info.id

        return resolve

    # --- read, delete, cancel -------------------------------------------------------------------------

    async def get(self, response_id: str, include_outputs: bool | None = None) -> ResponseObject:
        run = self.runs.get(response_id)
        if run is not None and (not run.done.is_set() or run.builder.status == ResponseStatus.CANCELLED):
            return run.builder.snapshot(include_outputs=include_outputs)
        stored = await self.store.get(response_id)
        if stored is None:
            if run is not None and not run.builder.base.get("store"):  # finished with `store: false`
                return run.builder.snapshot(include_outputs=include_outputs)  # (a stored one was deleted)
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        show = stored.include_outputs if include_outputs is None else include_outputs
        return {**stored.response, "output": wire_items(stored.response["output"], show)}

    async def input_items(self, response_id: str) -> list[dict[str, Any]]:
        stored = await self.store.get(response_id)
        if stored is None:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        # Listed as the SDK's `ResponseItem`s, whose custom tool call items carry a status (issue 17).
        return [
            {**it, "status": it.get("status", "completed")} if it.get("type") in _LISTED_WITH_STATUS else it
            for it in stored.input_items
        ]

    async def delete(self, response_id: str) -> None:
        run = self.runs.pop(response_id, None)
        if run is not None:
            run.cancel()
        deleted = await self.store.delete(response_id)
        if not deleted and run is None:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        if run is None:  # another replica may run it: its heartbeat cancels it, finds it deleted, keeps none
            await self.store.request_cancel(response_id)

    async def cancel(self, response_id: str) -> ResponseObject:
        run = self.runs.get(response_id)
        if run is None:  # run by another replica (answered as stored once it ended), or by none: 409
            await self.replica.cancel_elsewhere(response_id)
            return await self.get(response_id)
        if not run.background:
            raise Conflict(
                "Only responses created with background=true can be cancelled.", param="response_id"
            )
        if not run.done.is_set():
            run.cancel()
            if run.task is not None:
                await asyncio.wait({run.task}, timeout=10)
        return run.builder.snapshot()

    async def recover(self) -> None:
        """At start-up, before any response runs: the responses of stopped replicas (or of this one's previous
        life) are marked failed, then this replica's heartbeat starts (replicas.py)."""
        await self.replica.start()

    async def aclose(self) -> None:
        """Cancel every running response (server shutdown)."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for t in tasks:
            t.cancel("server shutting down")
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        await self.replica.aclose()


def _turns(req: CreateResponseRequest, items: list[dict[str, Any]]) -> list[Turn]:
    """The turns the model sees: the instructions, then the items."""
    turns = items_to_turns(items)
    if req.instructions:
        turns.insert(0, Message("system", req.instructions))
    return turns

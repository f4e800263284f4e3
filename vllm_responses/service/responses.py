"""The responses service: turns a validated request into a running response, and keeps, finds and cancels them.

Every response belongs to the project of the API key that created it (`project`, `DEFAULT_PROJECT` without
a keys file): to any other project it does not exist (the same `NotFound` as an unknown id)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from interpreter_service import Interpreter
from vllm_responses.agent.loop import AgentLoop
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.config import Config
from vllm_responses.context.compaction import Compaction, compact_window
from vllm_responses.context.extraction import ExtractionLimits, ExtractionPool
from vllm_responses.engine.base import Engine
from vllm_responses.protocol.errors import Conflict, NotFound
from vllm_responses.protocol.file_search_items import FILE_SEARCH_RESULTS_INCLUDE
from vllm_responses.protocol.items import ResponseObject, public_item, wire_items
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.status import ResponseStatus
from vllm_responses.protocol.web_search_options import includes_sources
from vllm_responses.runs.records import keep_record, response_record
from vllm_responses.runs.replicas import Replica
from vllm_responses.runs.run import Run
from vllm_responses.service.admission import Admission, Ticket, TokenBudget, default_max_queued
from vllm_responses.service.conversations import ConversationService
from vllm_responses.service.driver import RunDriver, after_admission, no_generation
from vllm_responses.service.includes import full_items, with_include
from vllm_responses.service.plan import Planner, ResponsePlan
from vllm_responses.service.quotas import ProjectLimits, input_size
from vllm_responses.store.base import DEFAULT_PROJECT, ResponseStore, StoredResponse
from vllm_responses.store.sealing import reasoning_seal
from vllm_responses.tools.containers import ContainerService
from vllm_responses.tools.file_inputs import FileInputs
from vllm_responses.tools.files import FileService
from vllm_responses.tools.uploads import UploadService

__all__ = ["ResponsesService"]

_LISTED_WITH_STATUS = ("custom_tool_call", "custom_tool_call_output")

logger = logging.getLogger(__name__)


def _spent(run: Run) -> int:
    """The tokens a run used (input and output of all its model calls)."""
    return run.builder.usage.input_tokens + run.builder.usage.output_tokens


class ResponsesService:
    """The server's responses: created (prepared by its `planner`, then run), found, cancelled and deleted."""

    def __init__(
        self,
        config: Config,
        engine: Engine,
        interpreter: Interpreter | None,
        store: ResponseStore,
        limits: ProjectLimits | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.interpreter = interpreter
        self.store = store
        self.limits = limits or ProjectLimits(config)
        self.files = FileService(store, partial(self.limits.check_store, store))
        self.uploads = UploadService(self.files, config.max_file_bytes)
        self.containers = ContainerService(interpreter, self.limits.sandbox, self.files)
        running = config.max_concurrent_responses or engine.max_num_seqs
        queued = config.max_queued_responses
        self.admission = Admission(running, default_max_queued(running) if queued is None else queued)
        self.extraction = extraction_pool(config)
        files = FileInputs(
            config, self.containers, self.extraction, lambda: engine.takes_images, files=self.files
        )
        self.seal = reasoning_seal(config.reasoning_key, config.db)
        self.conversations = ConversationService(store, files, self.limits, self.admission, self.seal)
        self.runs: dict[str, Run] = {}
        self.planner = Planner(
            config, engine, store, self.conversations, self.containers, self.runs, files, self.seal
        )
        self.driver = RunDriver(store, self.conversations, self.runs)
        self.replica = Replica(
            store,
            self.runs,
            replica_id=config.replica_id,
            heartbeat_s=config.replica_heartbeat,
            lease_s=config.replica_lease,
        )

    @property
    def model_names(self) -> tuple[str, ...]:
        return self.planner.model_names

    # --- create ---------------------------------------------------------------------------------------

    async def create(
        self,
        req: CreateResponseRequest,
        *,
        local: ResponseStore | None = None,
        generate: bool = True,
        project: str = DEFAULT_PROJECT,
        budget: TokenBudget | None = None,
    ) -> Run:
        """Start a response. `local` is a connection-local cache (WebSocket mode): `previous_response_id` is
        looked up there before the store, and the finished response is kept there whatever `store` says.
        `generate=False` prepares the conversation without calling the model: the response completes with
        no output, and its id can be continued from (a WebSocket warm-up).

        A response's place in admission (`admission`: admitted, queued, or a 429) is decided once its first
        model call passed the engine's up-front checks (else a 4xx), before it is returned: a queued one's
        stream opens at once with `response.created` (status `queued`) and `response.queued`, and goes on
        with `response.in_progress` once admitted. A background one is acknowledged `queued` however it is
        placed (`run.acknowledgement`), and its stream opens the same way. It holds its
        place until its run ends (a compaction that is due waits for its slot first: its summary is a model call;
        a `context_management` request under its threshold is placed as any other). One
        with `generate=False` is admitted too (it is prepared and kept as one that calls the model is).
        The response is `project`'s, and what it continues, references or runs code in must be too. `budget`
        (its key's tokens per minute) reserves the prompt's tokens and the output budget as it is admitted
        (a 429 when they do not fit), settled to the real usage when the run ends."""
        self.admission.refuse_if_full()  # before any work is spent on a request refused anyway
        # within the project's stored bytes (its output counted once kept); measured only under a bound
        if req.store and self.limits.of(project).stored_bytes:
            await self.limits.check_store(self.store, project, input_size(req), "input")
        resolved = await self.planner.resolve(req, local, project)
        req = resolved.request  # with the context's configuration updates
        # a compaction is a model call: it waits for its slot first (silently: its stream is not open yet)
        due = generate and await self.planner.compaction_due(req, resolved)
        ticket = await self.admission.acquire() if due else None
        try:
            plan = await self.planner.plan(req, resolved, project, compact=due)
            builder = ResponseBuilder(
                plan.echo,
                include_outputs=req.wants_outputs,
                include_reasoning=req.wants_reasoning,
                include_sources=includes_sources(req.include),
                include_results=FILE_SEARCH_RESULTS_INCLUDE in req.include,
                seal=partial(self.seal.seal, project=project),  # a blob only `project` opens
                summary=req.summary,
            )
            run = Run(builder, background=req.background, project=project)
            loop = AgentLoop(plan.agent, builder, self.engine, self.interpreter, run.id)
            prompt = 0
            for call in loop.upfront_requests() if generate else ():  # refused now: a 4xx, not a stream
                prompt = max(prompt, await self.engine.precheck(call))
            if ticket is None:
                ticket = self.admission.reserve()  # no await from here on: the place is held by the run
            settle = self._reserve_tokens(budget, plan, prompt) if generate and budget else None
        except BaseException:
            if ticket is not None:
                ticket.release()
            raise
        acknowledged = self._start(run, loop, req, plan, ticket, local, generate)
        if settle is not None and run.task is not None:  # the reservation settled to the real usage
            run.task.add_done_callback(lambda _task: settle(_spent(run)))
        if acknowledged is not None and req.background:  # its answer says it is kept
            await asyncio.shield(acknowledged)
        return run

    def _reserve_tokens(self, budget: TokenBudget, plan: ResponsePlan, prompt: int) -> Callable[[int], None]:
        """Reserve a response's tokens against its key's budget: its prompt's (`prompt`, as the engine counted
        them) and its output budget (`max_output_tokens`, or what the context leaves after the prompt)."""
        output = plan.agent.max_output_tokens
        if output is None:
            output = max(0, self.engine.max_model_len - prompt)
        return budget.reserve(prompt + output)

    def _start(
        self,
        run: Run,
        loop: AgentLoop,
        req: CreateResponseRequest,
        plan: ResponsePlan,
        ticket: Ticket,
        local: ResponseStore | None,
        generate: bool,
    ) -> asyncio.Future[None] | None:
        """Start the run's task; `ticket` is given back when it ends, however it ends (even cancelled before
        it ran). A queued or background run's first events (created, queued) are made now: it is acknowledged
        `queued` (a background one with that snapshot, `run.acknowledgement`). Returns the writing of its first
        record (`_acknowledged`)."""
        self.runs[run.id] = run
        events = loop.events() if generate else no_generation(run.builder)
        if not ticket.admitted or req.background:
            events = after_admission(run, ticket, run.builder.queued(), events)
        if req.background:
            run.acknowledgement = run.builder.snapshot()
        acknowledged = self._acknowledged(run, req, plan)
        run.task = asyncio.create_task(
            self.driver.drive(run, loop, events, req, plan.context, plan.input_items, local, acknowledged),
            name=f"response {run.id}",
        )
        run.task.add_done_callback(lambda _task: ticket.release())
        if acknowledged is not None:
            run.task.add_done_callback(lambda _task: self.replica.release_soon(run.id))
        return acknowledged

    def _acknowledged(
        self, run: Run, req: CreateResponseRequest, plan: ResponsePlan
    ) -> asyncio.Future[None] | None:
        """The writing of the response's first record, when it is kept as acknowledged; None otherwise.

        Kept as acknowledged: after a crash it is found (failed), not 404; on a shared store a foreground
        one too, so that other replicas see it running (its first event waits for that write, not the
        client's answer)."""
        if not (req.store and (req.background or self.store.shared)):
            return None
        record = response_record(run, req.wants_outputs, plan.context, plan.input_items)
        return asyncio.ensure_future(self._acknowledge(record))

    async def _acknowledge(self, record: StoredResponse) -> None:
        """A stored response's first record (background, or any on a shared store), leased to this replica first
        (runs/replicas.py): a failure is logged, not raised (the response runs; without its lease another
        replica's sweep ends it failed)."""
        try:
            await self.replica.hold(record.id)
        except Exception:
            logger.exception("could not lease response %s", record.id)
        await keep_record(self.store, record)

    async def count_input_tokens(self, req: CreateResponseRequest, project: str = DEFAULT_PROJECT) -> int:
        """Prompt tokens of the response's first model call, rendered as `create` would render it. Counting is
        admitted as a response is (the same slots and queue, a 429 past them): it renders and tokenizes a
        request-sized input, and checks its grammars."""
        slot = await self.admission.acquire()  # a 429 at once when full: no work precedes it
        try:
            resolved = await self.planner.resolve(req, project=project)
            return await self.engine.count_tokens(
                self.planner.first_call(resolved.request, resolved.turns, resolved.tools)
            )
        finally:
            slot.release()

    async def compact(self, req: CreateResponseRequest, project: str = DEFAULT_PROJECT) -> Compaction:
        """`POST /v1/responses/compact`: the request's context (history and input) compacted (context/compaction.py)."""
        self.admission.refuse_if_full()
        resolved = await self.planner.resolve(req, project=project)
        forced = req.structured_outputs  # vendor extension: forces the summary
        first = (forced[0] if forced else None) if isinstance(forced, list) else forced
        slot = await self.admission.acquire()  # a model call: it takes a slot as a response does
        try:
            return await compact_window(self.engine, resolved.items, structured=first)
        finally:
            slot.release()

    # --- read, delete, cancel -------------------------------------------------------------------------

    def run_of(self, response_id: str, project: str) -> Run | None:
        """The response's run in this process, when it has one and it is `project`'s."""
        run = self.runs.get(response_id)
        return run if run is not None and run.project == project else None

    async def stored_of(self, response_id: str, project: str) -> StoredResponse | None:
        """The stored response, when it is kept and it is `project`'s."""
        stored = await self.store.get(response_id)
        return stored if stored is not None and stored.project == project else None

    async def get(
        self, response_id: str, include: Sequence[str] = (), project: str = DEFAULT_PROJECT
    ) -> ResponseObject:
        """The response as it stands; `include` (a retrieve's), when it names any value, replaces the create's
        (service/includes.py)."""
        run = self.run_of(response_id, project)
        if run is not None and (not run.done.is_set() or run.builder.status == ResponseStatus.CANCELLED):
            return self._run_snapshot(run, include)
        stored = await self.stored_of(response_id, project)
        if stored is None:
            if run is not None and not run.builder.base.get("store"):  # finished with `store: false`
                return self._run_snapshot(run, include)  # (a stored one was deleted)
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        if include:
            full = full_items(stored.response["output"], stored.history)
            return with_include(stored.response, full, include, partial(self.seal.seal, project=project))
        output = wire_items(
            stored.response["output"], stored.include_outputs, include_sources=True, include_results=True
        )  # as kept
        return {**stored.response, "output": output}

    def _run_snapshot(self, run: Run, include: Sequence[str]) -> ResponseObject:
        """A response held in memory, as its create asked, or as `include` asks when it names any value."""
        if not include:
            return run.builder.snapshot()
        return with_include(
            run.builder.snapshot(), run.builder.output, include, partial(self.seal.seal, project=run.project)
        )

    async def input_items(self, response_id: str, project: str = DEFAULT_PROJECT) -> list[dict[str, Any]]:
        stored = await self.stored_of(response_id, project)
        if stored is None:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        # Listed as the SDK's `ResponseItem`s, whose custom tool call items carry a status.
        return [
            {**it, "status": it.get("status", "completed")} if it.get("type") in _LISTED_WITH_STATUS else it
            for it in map(public_item, stored.input_items)
        ]

    async def delete(self, response_id: str, project: str = DEFAULT_PROJECT) -> None:
        stored = await self.store.get(response_id)
        if stored is not None and stored.project != project:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        run = self.runs.pop(response_id, None) if self.run_of(response_id, project) else None
        if run is not None:
            run.cancel()
        deleted = await self.store.delete(response_id)
        if not deleted and run is None:
            raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
        if run is None:  # another replica may run it: its heartbeat cancels it, finds it deleted, keeps none
            await self.store.request_cancel(response_id)

    async def cancel(self, response_id: str, project: str = DEFAULT_PROJECT) -> ResponseObject:
        run = self.run_of(response_id, project)
        if run is None:  # run by another replica (answered as stored once it ended), or by none: 409
            if await self.stored_of(response_id, project) is None:
                raise NotFound(f"Response with id {response_id!r} not found.", param="response_id")
            await self.replica.cancel_elsewhere(response_id)
            return await self.get(response_id, project=project)
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
        life) are marked failed, then this replica's heartbeat starts (runs/replicas.py)."""
        await self.replica.start()

    async def aclose(self) -> None:
        """Cancel every running response (server shutdown)."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for t in tasks:
            t.cancel("server shutting down")
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        self.planner.grammars.close()
        await self.extraction.aclose()
        await self.replica.aclose()


def extraction_pool(config: Config) -> ExtractionPool:
    """The server's PDF-reading workers, sized and limited by `--input-file-extract-*`."""
    limits = ExtractionLimits(
        config.input_file_extract_cpu, config.input_file_extract_timeout, config.input_file_extract_memory
    )
    return ExtractionPool(config.input_file_extract_workers, limits)

"""The task behind a running response: plays the agent loop's events into its `Run`, then keeps the ended
response (the store, a WebSocket connection's cache, its conversation) before its last event goes out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from vllm_responses.agent.loop import AgentLoop
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.engine.types import Usage
from vllm_responses.errors import failure_code
from vllm_responses.observe.meter import ResponseMeter
from vllm_responses.protocol.errors import APIError
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.status import TERMINAL_EVENTS, ResponseStatus
from vllm_responses.runs.event_log import EventLog
from vllm_responses.runs.records import generated, keep_record, response_record
from vllm_responses.runs.run import Run
from vllm_responses.service.admission import Ticket
from vllm_responses.service.conversations import ConversationService
from vllm_responses.store.base import ResponseStore, StoredResponse

__all__ = ["APPENDING_STATUSES", "RUN_RETENTION_S", "RunDriver", "after_admission", "no_generation"]

logger = logging.getLogger(__name__)

# How long a finished run stays in memory for late streams (`GET ...?stream=true`) after it ends.
RUN_RETENTION_S = 300.0
# The endings of a response created with `conversation` that append its input and output to the
# conversation: an incomplete one (cut by max_output_tokens) is a turn the user saw; a failed or
# cancelled one appends nothing, so a retry starts from the same conversation.
APPENDING_STATUSES = (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE)


class RunDriver:
    """Drives runs for `ResponsesService`: `runs` is the service's table of live runs (a run leaves it
    `RUN_RETENTION_S` after it ends), `store` and `conversations` where ended responses are kept."""

    def __init__(
        self, store: ResponseStore, conversations: ConversationService, runs: dict[str, Run]
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.runs = runs

    async def drive(
        self,
        run: Run,
        loop: AgentLoop,
        events: AsyncIterator[Event],
        req: CreateResponseRequest,
        context: list[dict[str, Any]],
        input_items: list[dict[str, Any]],
        local: ResponseStore | None,
        acknowledged: asyncio.Future[None] | None = None,
    ) -> None:
        """The task behind a run: play the agent loop's `events` into the run, then store the result (its
        history: the items the model saw, `context`, then its output), and keep it in `local` when given.
        The last event (`response.completed` / `incomplete` / `failed`) is published only once the response
        is kept, so a client that saw it finds the response in the store, `local` and its conversation.
        A background response's events are also written to the store as they go (`EventLog`, the last one
        before the response is), so that any replica can re-stream it. A response acknowledged `queued` has
        its record written again once admitted (`in_progress`), so that other replicas see it run."""
        builder = run.builder
        meter = ResponseMeter()
        ending: list[Event] = []
        log = EventLog(self.store, run.id) if req.background and req.store else None
        written = acknowledged  # the record's last write under way: each waits for the one before
        queued = False

        def emit(event: Event) -> None:
            nonlocal written, queued
            meter.see(event)
            if log is not None:
                log.add(event)
            if event["type"] in TERMINAL_EVENTS:  # held back until the response is kept (below)
                ending.append(event)
            else:
                run.publish(event)
            queued = queued or event["type"] == "response.queued"
            if queued and event["type"] == "response.in_progress" and written is not None:
                # acknowledged `queued`: other replicas read it running from now on
                record = response_record(run, req.wants_outputs, context, input_items)
                written = asyncio.ensure_future(self._rewrite(run, written, record))

        try:
            await _play(run, loop, events, emit, acknowledged)
        finally:
            meter.finish(builder, turns=loop.model_calls, tool_calls=loop.tool_calls)
            try:
                if log is not None:  # its events, the terminal one included, before the ended response
                    await asyncio.shield(log.aclose())
                await self._keep(run, req, context, input_items, local, written)
            finally:
                for event in ending:
                    run.publish(event)
                run.close()
                asyncio.get_running_loop().call_later(RUN_RETENTION_S, self.runs.pop, run.id, None)

    async def _rewrite(self, run: Run, before: asyncio.Future[None], record: StoredResponse) -> None:
        """Write `run`'s `record` once the write `before` it ended (so that they land in order), unless the
        response was deleted meanwhile."""
        await asyncio.wait({before})
        if self.runs.get(run.id) is run:
            await keep_record(self.store, record)

    async def _keep(
        self,
        run: Run,
        req: CreateResponseRequest,
        context: list[dict[str, Any]],
        input_items: list[dict[str, Any]],
        local: ResponseStore | None,
        acknowledged: asyncio.Future[None] | None,
    ) -> None:
        """Store the ended response where it is kept, and append it to its conversation."""
        if local is not None or req.store:  # the record is only built where it is kept
            record = response_record(run, req.wants_outputs, context, input_items)
            if local is not None:  # before anything awaits: whoever saw the end finds it there
                await local.save(record)
            if req.store and self.runs.get(run.id) is run:  # (not when the response was deleted meanwhile)
                if acknowledged is not None:  # the earlier records' writes end before this one's starts
                    await asyncio.wait({acknowledged})
                await asyncio.shield(keep_record(self.store, record))
        if req.conversation and run.builder.status in APPENDING_STATUSES:
            items = [*input_items, *generated(run)]
            await asyncio.shield(self._append_to_conversation(req.conversation, items))

    async def _append_to_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        try:
            await self.conversations.append(conversation_id, items)
        except Exception:
            logger.exception("could not append to conversation %s", conversation_id)


async def _play(
    run: Run,
    loop: AgentLoop,
    events: AsyncIterator[Event],
    emit: Callable[[Event], None],
    acknowledged: asyncio.Future[None] | None,
) -> None:
    """Pass the agent loop's `events` to `emit` (once `acknowledged`); a run the server ends (`run.ending`)
    or an error ends it with the events of a failed response."""
    builder = run.builder
    try:
        if acknowledged is not None:  # its first record is written before anything else
            await asyncio.wait({acknowledged})  # (a cancel here leaves that write be)
        async for event in events:
            run.failure = loop.failure or run.failure  # set before its `response.failed` is seen
            emit(event)
    except asyncio.CancelledError:
        if run.ending is None:
            builder.cancelled(loop.usage)
            raise
        # ended by the server (shutdown, engine death): a failed response, streamed and stored
        cast(asyncio.Task[None], asyncio.current_task()).uncancel()
        run.failure = run.ending
        for event in builder.failed(run.ending.message, loop.usage, code=failure_code(run.ending)):
            emit(event)
    except Exception:
        logger.exception("response %s failed", run.id)
        for event in builder.failed("The server failed while generating this response.", loop.usage):
            emit(event)


async def no_generation(builder: ResponseBuilder) -> AsyncIterator[Event]:
    """The events of a response that does not call the model (`generate=False`): created, completed."""
    for event in [*builder.created(), *builder.completed(Usage())]:
        yield event


async def after_admission(
    run: Run, ticket: Ticket, opening: list[Event], events: AsyncIterator[Event]
) -> AsyncIterator[Event]:
    """The events of a queued response: its `opening` (created, queued) at once, then `events` once `ticket`
    is admitted. Admission closed meanwhile (shutdown, engine death): it ends failed with that error, never
    having run (`run.unadmitted`)."""
    for event in opening:
        yield event
    try:
        await ticket.wait()
    except APIError as error:
        run.failure, run.unadmitted = error, True
        for event in run.builder.failed(error.message, Usage(), code=failure_code(error)):
            yield event
        return
    async for event in events:
        yield event

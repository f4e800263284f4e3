"""`service/driver.py` on its own: a run's life between the agent loop, the store and the client stream (its
events played into the `Run`, the ended response kept before its last event goes out, a failure, a cancel, an
end by the server, the conversation appended to, the wait for admission), over the scripted engine, no
server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.fakes import FakeEngine, echo_fields, say
from vllm_responses.agent.loop import AgentLoop, AgentPlan
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.engine.types import Message, Sampling
from vllm_responses.protocol.errors import APIError, Unavailable
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.runs.run import Run
from vllm_responses.service import driver
from vllm_responses.service.admission import Admission
from vllm_responses.service.driver import RunDriver, after_admission, no_generation
from vllm_responses.store.memory import MemoryStore

INPUT = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


class Conversations:
    """The conversation service as the driver uses it: what was appended, to which conversation."""

    def __init__(self) -> None:
        self.appended: list[tuple[str, list[dict[str, Any]]]] = []

    async def append(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        self.appended.append((conversation_id, items))


class Setup:
    """One response ready to drive: its request, run and loop over the scripted engine, and the driver."""

    def __init__(self, engine: FakeEngine, **body: Any) -> None:
        self.req = CreateResponseRequest.model_validate({"model": "fake-model", "input": "hi", **body})
        self.store = MemoryStore()
        self.conversations = Conversations()
        self.runs: dict[str, Run] = {}
        self.driver = RunDriver(self.store, self.conversations, self.runs)  # type: ignore[arg-type]
        builder = ResponseBuilder(echo_fields(), include_outputs=True)
        self.run = Run(builder, background=self.req.background)
        self.runs[self.run.id] = self.run
        plan = AgentPlan(
            turns=(Message("user", "hi"),),
            tools=(),
            tool_choice="auto",
            parallel_tool_calls=True,
            sampling=Sampling(),
            max_output_tokens=None,
            max_tool_calls=None,
            max_turns=8,
            code_timeout_s=5.0,
        )
        self.loop = AgentLoop(plan, builder, engine, None, self.run.id)

    async def drive(
        self, events: AsyncIterator[Event] | None = None, local: MemoryStore | None = None
    ) -> None:
        await self.driver.drive(self.run, self.loop, events or self.loop.events(), self.req, [], INPUT, local)


def types(run: Run) -> list[str]:
    return [e["type"] for e in run.events]


async def test_the_loops_events_are_played_into_the_run_and_the_response_kept() -> None:
    engine = FakeEngine()
    engine.reset(say("Hello."))
    s = Setup(engine)
    await s.drive()
    assert types(s.run)[0] == "response.created" and types(s.run)[-1] == "response.completed"
    assert s.run.done.is_set()
    kept = await s.store.get(s.run.id)
    assert kept is not None and kept.response["status"] == "completed"
    assert kept.input_items == INPUT and kept.response["output"][0]["content"][0]["text"] == "Hello."


async def test_the_last_event_goes_out_only_once_the_response_is_kept() -> None:
    engine = FakeEngine()
    s, local = Setup(engine), MemoryStore()
    seen: list[tuple[str, bool, bool]] = []
    publish = s.run.publish

    def watch(event: Event) -> None:
        kept = s.run.id in s.store._rows, s.run.id in local._rows
        seen.append((event["type"], *kept))
        publish(event)

    s.run.publish = watch  # type: ignore[method-assign]
    await s.drive(local=local)
    assert seen[-1] == ("response.completed", True, True)
    assert all(not stored and not cached for _type, stored, cached in seen[:-1])


async def test_a_response_not_stored_is_kept_only_in_the_connections_cache() -> None:
    s, local = Setup(FakeEngine(), store=False), MemoryStore()
    await s.drive(local=local)
    assert await s.store.get(s.run.id) is None
    cached = await local.get(s.run.id)
    assert cached is not None and cached.response["status"] == "completed"


async def test_an_error_in_the_loop_ends_the_response_failed_and_kept() -> None:
    async def broken() -> AsyncIterator[Event]:
        for event in s.run.builder.created():
            yield event
        raise RuntimeError("a bug")

    s = Setup(FakeEngine())
    await s.drive(broken())
    assert types(s.run)[-1] == "response.failed"
    error = s.run.events[-1]["response"]["error"]  # type: ignore[typeddict-item]
    assert error == {"code": "server_error", "message": "The server failed while generating this response."}
    kept = await s.store.get(s.run.id)
    assert kept is not None and kept.response["status"] == "failed"


async def stalled(s: Setup, started: asyncio.Event) -> AsyncIterator[Event]:
    """The loop's first events, then a wait that only a cancel ends."""
    for event in s.run.builder.created():
        yield event
    started.set()
    await asyncio.Event().wait()


async def test_a_cancelled_run_is_kept_cancelled_with_no_event() -> None:
    s, started = Setup(FakeEngine()), asyncio.Event()
    s.run.task = asyncio.create_task(s.drive(stalled(s, started)))
    await started.wait()
    s.run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await s.run.task
    assert types(s.run) == ["response.created", "response.in_progress"]
    kept = await s.store.get(s.run.id)
    assert kept is not None and kept.response["status"] == "cancelled" and s.run.done.is_set()


async def test_a_run_the_server_ends_fails_with_its_error_streamed_and_kept() -> None:
    s, started = Setup(FakeEngine()), asyncio.Event()
    s.run.task = asyncio.create_task(s.drive(stalled(s, started)))
    await started.wait()
    s.run.end(Unavailable("The server is shutting down."))
    await s.run.task  # not cancelled: it ended the response
    assert types(s.run)[-1] == "response.failed" and isinstance(s.run.failure, Unavailable)
    assert s.run.events[-1]["response"]["error"]["message"] == "The server is shutting down."  # type: ignore[typeddict-item]
    kept = await s.store.get(s.run.id)
    assert kept is not None and kept.response["status"] == "failed"


async def test_a_completed_response_is_appended_to_its_conversation() -> None:
    engine = FakeEngine()
    engine.reset(say("Hello."))
    s = Setup(engine, conversation="conv_1")
    await s.drive()
    ((conversation, items),) = s.conversations.appended
    assert conversation == "conv_1" and items[0] == INPUT[0]
    assert [it["type"] for it in items] == ["message", "message"] and items[1]["role"] == "assistant"


async def test_a_failed_response_appends_nothing_to_its_conversation() -> None:
    async def broken() -> AsyncIterator[Event]:
        for event in s.run.builder.created():
            yield event
        raise RuntimeError("a bug")

    s = Setup(FakeEngine(), conversation="conv_1")
    await s.drive(broken())
    assert types(s.run)[-1] == "response.failed" and s.conversations.appended == []


async def test_a_run_leaves_the_table_of_runs_once_its_retention_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(driver, "RUN_RETENTION_S", 0.0)
    s = Setup(FakeEngine())
    await s.drive()
    assert s.runs == {s.run.id: s.run}  # still there for late streams, until the timer runs
    async with asyncio.timeout(5):  # the timer's next turn of the event loop
        while s.runs:
            await asyncio.sleep(0)


async def test_no_generation_is_created_then_completed() -> None:
    s = Setup(FakeEngine())
    await s.drive(no_generation(s.run.builder))
    assert types(s.run) == ["response.created", "response.in_progress", "response.completed"]


async def test_a_queued_response_runs_once_admitted() -> None:
    admission = Admission(1, 1)
    holder = admission.reserve()
    s = Setup(FakeEngine())
    ticket = admission.reserve()
    assert not ticket.admitted
    events = after_admission(s.run, ticket, s.run.builder.queued(), s.loop.events())
    task = asyncio.create_task(s.drive(events))
    async with asyncio.timeout(5):
        while "response.queued" not in types(s.run):
            await asyncio.sleep(0)
    assert types(s.run) == ["response.created", "response.queued"]
    holder.release()
    await task
    assert types(s.run)[2:3] == ["response.in_progress"] and types(s.run)[-1] == "response.completed"


async def test_a_queued_response_the_server_closes_fails_never_having_run() -> None:
    admission = Admission(1, 1)
    admission.reserve()
    s = Setup(FakeEngine())
    ticket = admission.reserve()
    events = after_admission(s.run, ticket, s.run.builder.queued(), s.loop.events())
    task = asyncio.create_task(s.drive(events))
    async with asyncio.timeout(5):
        while "response.queued" not in types(s.run):
            await asyncio.sleep(0)
    closing: APIError = Unavailable("The server is shutting down.")
    admission.close(closing)
    await task
    assert types(s.run) == ["response.created", "response.queued", "response.failed"]
    assert s.run.unadmitted and s.run.failure is closing and s.loop.model_calls == 0

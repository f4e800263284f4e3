"""Admission over a real server (uvicorn on 127.0.0.1, the scripted engine holding its generations open): a burst
past both limits gets 429s with `Retry-After` and every admitted response completes; a queued client that
leaves frees its place; background responses hold a slot; WebSocket creates go through the same admission;
a slot comes back however a response ends. A queued stream opens at once (created with status `queued`, then
`response.queued`) and the SDK's stream helper takes it; a background response is acknowledged `queued`, runs
when admitted, and can be cancelled while queued; /metrics shows the wait."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseQueuedEvent
from websockets.sync.client import connect

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.metrics_text import parse, value
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import GenerateRequest
from vllm_responses.service.admission import Admission

MODEL = "fake-model"
STREAM = {"model": MODEL, "input": "hi", "stream": True}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    config = Config(max_concurrent_responses=2, max_queued_responses=2, code_interpreter_timeout=5.0)
    live = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    yield live
    live.stop()


@pytest.fixture
def engine(server: LiveServer) -> Iterator[FakeEngine]:
    fake: FakeEngine = server.engine
    fake.reset()
    fake.hold = hold = threading.Event()  # every generation waits until the test lets it go (`let_go`)
    yield fake
    hold.set()


def let_go(engine: FakeEngine) -> None:
    assert engine.hold is not None
    engine.hold.set()


def admission(server: LiveServer) -> Admission:
    adm: Admission = server.app.state.vr.service.admission
    return adm


async def eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


@dataclass
class Attempt:
    """One streamed create: its status once the headers came (None while it waits for admission), the events."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


async def attempt(client: httpx.AsyncClient, body: dict[str, Any], out: Attempt) -> None:
    async with client.stream("POST", "/v1/responses", json=body) as r:
        if r.status_code != 200:  # the status is set once the error has been read, so both are seen together
            out.error = json.loads(await r.aread())["error"]
        out.status, out.headers = r.status_code, dict(r.headers)
        if out.error is not None:
            return
        buffer = ""
        async for chunk in r.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                for line in frame.splitlines():
                    if line.startswith("data: "):
                        out.events.append(json.loads(line[6:]))


def start(client: httpx.AsyncClient, body: dict[str, Any] = STREAM) -> tuple[Attempt, asyncio.Task[None]]:
    out = Attempt()
    return out, asyncio.ensure_future(attempt(client, body, out))


def client_of(server: LiveServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.base_url, timeout=60)


def rejected_metric(server: LiveServer) -> float:
    samples, _types = parse(httpx.get(server.base_url + "/metrics", timeout=30).text)
    return value(samples, "vllm_responses_admission_rejected_total")


async def test_a_burst_past_both_limits(server: LiveServer, engine: FakeEngine) -> None:
    adm = admission(server)
    before = rejected_metric(server)
    async with client_of(server) as client:
        started = [start(client, {**STREAM, "input": f"hi {i}"}) for i in range(10)]
        attempts = [a for a, _ in started]
        await eventually(lambda: sum(a.status == 429 for a in attempts) == 6)
        assert (adm.running, adm.queued) == (2, 2)
        await eventually(lambda: sum(len(a.events) >= 2 for a in attempts) == 4)
        running = [a for a in attempts if a.types[1:2] == ["response.in_progress"]]
        waiting = [a for a in attempts if a.types[1:2] == ["response.queued"]]
        assert len(running) == 2 and len(waiting) == 2
        # admitted: created and in_progress went out while the engine has produced nothing
        assert all(a.types == ["response.created", "response.in_progress"] for a in running)
        # queued: created (status queued) and queued went out at once, and nothing more yet
        assert all(a.types == ["response.created", "response.queued"] for a in waiting)
        assert all(a.status == 200 and a.events[0]["response"]["status"] == "queued" for a in waiting)
        for a in attempts:
            if a.status == 429:
                assert a.error is not None and a.error["type"] == "rate_limit_error"
                assert (
                    a.error["code"] == "rate_limit_exceeded"
                    and "--max-concurrent-responses" in a.error["message"]
                )
                assert int(a.headers["retry-after"]) >= 1
        let_go(engine)
        await asyncio.gather(*(t for _, t in started))
    for a in running:
        assert a.types[:2] == ["response.created", "response.in_progress"]
    for a in waiting:  # then in_progress once admitted, and the rest as usual
        assert a.types[:3] == ["response.created", "response.queued", "response.in_progress"]
        assert a.events[2]["response"]["status"] == "in_progress"
    for a in running + waiting:
        assert a.types[-1] == "response.completed"
        assert [e["sequence_number"] for e in a.events] == list(range(len(a.events)))
    assert len(engine.requests) == 4
    assert rejected_metric(server) - before == 6
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))


async def test_a_queued_client_that_leaves_frees_its_place(server: LiveServer, engine: FakeEngine) -> None:
    adm = admission(server)
    async with client_of(server) as client:
        started = [start(client) for _ in range(4)]
        await eventually(lambda: (adm.running, adm.queued) == (2, 2))
        await eventually(lambda: sum(len(a.events) >= 2 for a, _ in started) == 4)
        rejected = adm.rejected_total
        leaving = next(t for a, t in started if a.types[-1] == "response.queued")
        leaving.cancel()  # the client closes its connection while it waits for admission
        await eventually(lambda: adm.queued == 1)
        late, late_task = start(client)  # the place it left is free: queued, not refused
        await eventually(lambda: adm.queued == 2)
        await eventually(lambda: late.types == ["response.created", "response.queued"])
        assert adm.rejected_total == rejected
        let_go(engine)
        await asyncio.gather(late_task, *(t for _, t in started if t is not leaving))
    assert late.types[-1] == "response.completed"
    assert len(engine.requests) == 4  # the one that left never reached the engine
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))


async def test_background_responses_hold_a_slot_until_they_end(
    server: LiveServer, engine: FakeEngine
) -> None:
    adm = admission(server)
    async with client_of(server) as client:
        background = []
        for _ in range(2):
            r = await client.post("/v1/responses", json={"model": MODEL, "input": "bg", "background": True})
            assert r.status_code == 200, r.text
            background.append(r.json()["id"])
        assert (adm.running, adm.queued) == (2, 0)
        waiting, task = start(client)
        await eventually(lambda: adm.queued == 1)
        await eventually(lambda: waiting.types == ["response.created", "response.queued"])
        r = await client.post(f"/v1/responses/{background[0]}/cancel")  # its slot goes to the waiting stream
        assert r.json()["status"] == "cancelled"
        await eventually(lambda: len(waiting.events) >= 3)
        assert waiting.status == 200 and (adm.running, adm.queued) == (2, 0)
        let_go(engine)
        await task
        assert waiting.types[-1] == "response.completed"
        await eventually(lambda: adm.running == 0)
        r = await client.get(f"/v1/responses/{background[1]}")
        assert r.json()["status"] == "completed"


async def test_the_slot_comes_back_however_the_response_ends(server: LiveServer, engine: FakeEngine) -> None:
    adm = admission(server)
    async with client_of(server) as client:
        # a streaming client that leaves mid-stream: cancelled
        gone, task = start(client)
        await eventually(lambda: len(gone.events) >= 2)
        task.cancel()
        await eventually(lambda: adm.running == 0 and len(engine.aborted) == 1)
        # a non-streamed client that leaves while its response runs: cancelled too
        quiet = asyncio.ensure_future(client.post("/v1/responses", json={"model": MODEL, "input": "x"}))
        await eventually(lambda: adm.running == 1)
        quiet.cancel()
        await eventually(lambda: adm.running == 0 and len(engine.aborted) == 2)

        def broken(request: GenerateRequest) -> list[Any]:
            raise EngineError("the engine fell over")

        engine.reset(broken)  # failed
        r = await client.post("/v1/responses", json={"model": MODEL, "input": "x"})
        assert r.json()["status"] == "failed"
        engine.reset()  # completed
        r = await client.post("/v1/responses", json={"model": MODEL, "input": "x"})
        assert r.json()["status"] == "completed"
        engine.context = 5  # refused up front: never admitted
        r = await client.post("/v1/responses", json={**STREAM, "input": "x" * 400})
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert (adm.running, adm.queued) == (0, 0)


async def test_websocket_creates_go_through_the_same_admission(
    server: LiveServer, engine: FakeEngine
) -> None:
    adm = admission(server)
    async with client_of(server) as client:
        started = [start(client) for _ in range(4)]
        await eventually(lambda: (adm.running, adm.queued) == (2, 2))

        def over_websocket() -> dict[str, Any]:
            with connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=10) as ws:
                ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "ws"}))
                event: dict[str, Any] = json.loads(ws.recv(timeout=30))
                return event

        event = await asyncio.to_thread(over_websocket)
        assert event["type"] == "error" and event["status"] == 429
        assert event["error"]["code"] == "rate_limit_exceeded"
        let_go(engine)
        await asyncio.gather(*(t for _, t in started))
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))


def wait_metric(server: LiveServer) -> tuple[float, float]:
    """`vllm_responses_admission_wait_seconds`: its count and its sum."""
    samples, types = parse(httpx.get(server.base_url + "/metrics", timeout=30).text)
    assert types["vllm_responses_admission_wait_seconds"] == "histogram"
    return (
        value(samples, "vllm_responses_admission_wait_seconds_count"),
        value(samples, "vllm_responses_admission_wait_seconds_sum"),
    )


async def test_the_sdk_stream_helper_takes_a_queued_stream(server: LiveServer, engine: FakeEngine) -> None:
    adm = admission(server)
    count, total = wait_metric(server)
    sdk = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    async with sdk, client_of(server) as client:
        started = [start(client) for _ in range(2)]  # both slots held
        await eventually(lambda: adm.running == 2)
        seen: list[Any] = []

        async def queued_stream() -> Any:
            async with sdk.responses.stream(model=MODEL, input="queued") as stream:
                async for event in stream:
                    seen.append(event)
                return await stream.get_final_response()

        task = asyncio.ensure_future(queued_stream())
        await eventually(lambda: len(seen) >= 2)  # at once, while it waits
        assert adm.queued == 1 and [e.type for e in seen] == ["response.created", "response.queued"]
        assert isinstance(seen[1], ResponseQueuedEvent) and seen[0].response.status == "queued"
        await asyncio.sleep(0.2)
        assert len(seen) == 2  # nothing more until it is admitted
        let_go(engine)
        final = await task
        await asyncio.gather(*(t for _, t in started))
    assert seen[2].type == "response.in_progress" and seen[2].response.status == "in_progress"
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert final.status == "completed" and final.output_text
    after_count, after_total = wait_metric(server)
    assert after_count - count == 3  # every admission is observed, at once (~0 s) or after its wait
    assert after_total - total > 0.2  # the queued one waited at least the 0.2 s above
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))


async def test_a_background_response_is_queued_then_runs(server: LiveServer, engine: FakeEngine) -> None:
    adm = admission(server)
    async with client_of(server) as client:
        held = []
        for _ in range(2):
            r = await client.post("/v1/responses", json={"model": MODEL, "input": "bg", "background": True})
            assert r.json()["status"] == "queued"  # admitted at once, acknowledged `queued`
            held.append(r.json()["id"])
        r = await client.post("/v1/responses", json={"model": MODEL, "input": "later", "background": True})
        assert r.status_code == 200 and r.json()["status"] == "queued"
        waiting = r.json()["id"]
        assert (adm.running, adm.queued) == (2, 1)
        assert (await client.get(f"/v1/responses/{waiting}")).json()["status"] == "queued"
        await client.post(f"/v1/responses/{held[0]}/cancel")  # its slot goes to the queued one
        await eventually(lambda: adm.queued == 0)
        assert (await client.get(f"/v1/responses/{waiting}")).json()["status"] == "in_progress"
        let_go(engine)
        await eventually(lambda: adm.running == 0)
        done = (await client.get(f"/v1/responses/{waiting}")).json()
        assert done["status"] == "completed" and done["output"]
        async with client.stream("GET", f"/v1/responses/{waiting}?stream=true") as r:
            replay = [
                json.loads(line[6:])
                for line in [x async for x in r.aiter_lines()]
                if line.startswith("data: ")
            ]
    types = [e["type"] for e in replay]
    assert types[:3] == ["response.created", "response.queued", "response.in_progress"]
    assert types[-1] == "response.completed"


async def test_a_queued_background_response_can_be_cancelled(server: LiveServer, engine: FakeEngine) -> None:
    adm = admission(server)
    async with client_of(server) as client:
        started = [start(client) for _ in range(2)]
        await eventually(lambda: adm.running == 2)
        r = await client.post("/v1/responses", json={"model": MODEL, "input": "later", "background": True})
        waiting = r.json()["id"]
        assert r.json()["status"] == "queued" and adm.queued == 1
        r = await client.post(f"/v1/responses/{waiting}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        assert (adm.running, adm.queued) == (2, 0)  # it left the queue
        assert (await client.get(f"/v1/responses/{waiting}")).json()["status"] == "cancelled"
        let_go(engine)
        await asyncio.gather(*(t for _, t in started))
    assert len(engine.requests) == 2  # the cancelled one never reached the engine
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))


async def test_queued_websocket_and_non_streamed_creates(server: LiveServer, engine: FakeEngine) -> None:
    """Over WebSocket a queued create's events open the same way; a non-streamed request waits, then answers
    its completed response as before."""
    adm = admission(server)
    async with client_of(server) as client:
        started = [start(client) for _ in range(2)]
        await eventually(lambda: adm.running == 2)
        quiet = asyncio.ensure_future(client.post("/v1/responses", json={"model": MODEL, "input": "quiet"}))
        await eventually(lambda: adm.queued == 1)

        def over_websocket() -> list[dict[str, Any]]:
            with connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=10) as ws:
                ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "ws"}))
                events = [json.loads(ws.recv(timeout=30)) for _ in range(2)]
                assert adm.queued == 2 and not quiet.done()
                let_go(engine)
                while events[-1]["type"] not in ("response.completed", "response.failed", "error"):
                    events.append(json.loads(ws.recv(timeout=30)))
                return events

        events = await asyncio.to_thread(over_websocket)
        answer = await quiet
        await asyncio.gather(*(t for _, t in started))
    types = [e["type"] for e in events]
    assert types[:3] == ["response.created", "response.queued", "response.in_progress"], types
    assert events[0]["response"]["status"] == "queued" and types[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert answer.status_code == 200 and answer.json()["status"] == "completed" and answer.json()["output"]
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))


async def test_context_management_under_its_threshold_is_queued_like_any_other(
    server: LiveServer, engine: FakeEngine
) -> None:
    """A `context_management` request whose context is under its threshold (no compaction, so no model call
    before the response begins) opens at once as queued; one whose compaction is due waits for its slot first,
    its stream not open yet (its summary is a model call)."""
    adm = admission(server)

    def managed(threshold: int) -> dict[str, Any]:  # ~33 tokens to the scripted engine; an older turn
        entry = {"type": "compaction", "compact_threshold": threshold}
        turns = [("user", "hi " * 40), ("assistant", "ok"), ("user", "and now?")]
        return {
            **STREAM,
            "input": [{"role": r, "content": c} for r, c in turns],
            "context_management": [entry],
        }

    async with client_of(server) as client:
        started = [start(client) for _ in range(2)]  # both slots held
        await eventually(lambda: adm.running == 2)
        under, under_task = start(client, managed(1000))
        await eventually(lambda: len(under.events) >= 2)
        assert under.types == ["response.created", "response.queued"] and adm.queued == 1
        due, due_task = start(client, managed(5))
        await eventually(lambda: adm.queued == 2)
        await asyncio.sleep(0.2)
        assert due.status is None and not due.events  # waiting for its slot, unheard
        let_go(engine)
        await asyncio.gather(under_task, due_task, *(t for _, t in started))
    assert under.types[2] == "response.in_progress" and under.types[-1] == "response.completed"
    assert due.types[0] == "response.created" and due.types[-1] == "response.completed"
    assert "compaction" in [
        e["item"]["type"] for e in due.events if e["type"] == "response.output_item.added"
    ]
    await eventually(lambda: (adm.running, adm.queued) == (0, 0))

"""Instant start on the real engine (vLLM, tiny model): `response.created` reaches the client while the engine is
too busy to start the new response's generation; what vLLM would refuse up front is still a 400 when streamed; a
stream queued for admission opens at once (created `queued`, `response.queued`) and the SDK's helper reads it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from vllm.v1.metrics.stats import RequestStateStats

from tests.support.real import TINY, exactly, tiny_model_server
from tests.support.serving import LiveServer
from vllm_responses.config import Config

pytestmark = pytest.mark.engine

# vLLM runs two sequences at once; our admission lets more in, so a third response is admitted (and starts
# streaming) while vLLM still queues its generation behind the two running ones. The long ones could run for
# thousands of tokens; each test lets them go (its clients leave, and the server aborts their generations) once
# it has heard what it waits for, so what comes after is caused by that release, not by a race between sockets.
ENGINE_SEQS = 2
LONG_TOKENS = 3500
LONG: dict[str, Any] = {"input": "Count.", "max_output_tokens": LONG_TOKENS, "ignore_eos": True}


@pytest.fixture(scope="module")
def busy_server() -> Iterator[LiveServer]:
    server = tiny_model_server(
        workers=0,
        max_model_len=4096,
        engine_flags=["--max-num-seqs", str(ENGINE_SEQS)],
        config=Config(max_concurrent_responses=8),
    )
    yield server
    server.stop()


async def follow(
    client: httpx.AsyncClient,
    name: str,
    body: dict[str, Any],
    log: list[tuple[str, str]],
    ids: dict[str, str],
) -> None:
    """Stream one response, appending (name, event type) to `log` as each event arrives; `ids[name]` is its id."""
    async with client.stream("POST", "/v1/responses", json={"model": TINY, "stream": True, **body}) as r:
        assert r.status_code == 200, await r.aread()
        buffer = ""
        async for chunk in r.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                for line in frame.splitlines():
                    if line.startswith("data: "):
                        event = json.loads(line[6:])
                        if event["type"] == "response.created":
                            ids[name] = event["response"]["id"]
                        log.append((name, event["type"]))


TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def kinds(log: list[tuple[str, str]], name: str) -> list[str]:
    return [k for n, k in log if n == name]


async def until(check: Callable[[], bool], timeout: float = 300) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


def engine_records(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, RequestStateStats]:
    """vLLM's own record of each generation it runs (`RequestOutput.metrics`), by vLLM request id: when its
    engine core queued and scheduled it and produced its tokens. These are the engine core's `time.monotonic()`,
    the host's CLOCK_MONOTONIC, the same clock as this process's."""
    llm = server.engine.llm
    records: dict[str, RequestStateStats] = {}
    generate = llm.generate

    def recording(prompt: Any, params: Any, request_id: str, *args: Any, **kwargs: Any) -> Any:
        stream = generate(prompt, params, request_id, *args, **kwargs)

        async def outputs() -> AsyncIterator[Any]:
            try:
                async for out in stream:
                    assert out.metrics is not None, "vLLM keeps no request stats (--disable-log-stats?)"
                    records[request_id] = out.metrics
                    yield out
            finally:
                await stream.aclose()

        return outputs()

    monkeypatch.setattr(llm, "generate", recording)
    return records


def record_of(records: dict[str, RequestStateStats], response_id: str) -> RequestStateStats:
    (found,) = [r for vllm_id, r in records.items() if vllm_id.startswith(response_id + "-")]
    return found


async def release(tasks: list[asyncio.Task[None]]) -> float:
    """The long responses' clients leave (the server aborts their generations); when that began."""
    released = time.monotonic()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return released


def cut_short(records: dict[str, RequestStateStats], ids: dict[str, str], *names: str) -> None:
    """The long generations were still running when released: none reached its 3,500 tokens."""
    for name in names:
        made = record_of(records, ids[name]).num_generation_tokens
        assert made < LONG_TOKENS, f"{name} ran to its end ({made} tokens) before it was released"


async def test_created_arrives_before_the_first_token_on_a_busy_engine(
    busy_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = engine_records(busy_server, monkeypatch)
    log: list[tuple[str, str]] = []
    ids: dict[str, str] = {}
    names = [f"long{i}" for i in range(ENGINE_SEQS)]
    async with httpx.AsyncClient(base_url=busy_server.base_url, timeout=300) as client:
        longs = [asyncio.ensure_future(follow(client, n, LONG, log, ids)) for n in names]
        await until(lambda: all((n, "response.output_text.delta") in log for n in names))
        # every sequence the engine runs at once is taken...
        new = asyncio.ensure_future(
            follow(client, "new", {"input": "Hello.", "max_output_tokens": 16}, log, ids)
        )
        await until(lambda: ("new", "response.in_progress") in log)
        heard = kinds(log, "new")
        released = await release(longs)
        await new
    cut_short(records, ids, *names)
    mine = record_of(records, ids["new"])
    # ...so vLLM could schedule the new generation only after the long ones were let go (its own record); the
    # client had heard created and in_progress before that, and nothing else of the new response
    assert mine.scheduled_ts > released
    assert heard == ["response.created", "response.in_progress"]
    events = kinds(log, "new")
    assert events[:2] == heard and events[-1] in TERMINAL[:2]
    assert "response.output_text.delta" in events


async def test_what_vllm_refuses_up_front_is_a_400_when_streamed(busy_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=busy_server.base_url, timeout=300) as client:
        refused = {
            "context_length_exceeded": {"input": "word " * 5000},  # longer than the 4096-token context
            "invalid_request": {"input": "hi", "logit_bias": {"1000000": 5}},  # not a token of the vocabulary
        }
        for code, body in refused.items():
            r = await client.post("/v1/responses", json={"model": TINY, "stream": True, **body})
            assert r.status_code == 400, r.text
            assert r.headers["content-type"].startswith("application/json")
            error = r.json()["error"]
            assert error["code"] == code and error["type"] == "invalid_request_error", error
            if code == "context_length_exceeded":
                assert "maximum context length is 4096 tokens" in error["message"]


async def test_a_queued_stream_opens_at_once_and_the_sdk_takes_it(
    busy_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One admission slot (set on the live controller): a second stream waits behind a long one, yet hears
    `response.created` (queued) and `response.queued` while the long one still holds the slot; the SDK's stream
    helper reads it to the end once the long one is let go, and its forced answer comes after
    `response.in_progress`."""
    adm = busy_server.app.state.vr.service.admission
    monkeypatch.setattr(adm, "max_running", 1)
    records = engine_records(busy_server, monkeypatch)
    sdk = openai.AsyncOpenAI(base_url=busy_server.base_url + "/v1", api_key="unused", max_retries=0)
    log: list[tuple[str, str]] = []
    ids: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=busy_server.base_url, timeout=300) as client:
        long = asyncio.ensure_future(follow(client, "long", LONG, log, ids))
        await until(lambda: ("long", "response.output_text.delta") in log)
        seen: list[Any] = []
        forced = {"structured_outputs": [exactly("Queued, then answered.")], "temperature": 0}
        async with sdk.responses.stream(
            model=TINY, input="Hello.", max_output_tokens=64, extra_body=forced
        ) as stream:
            async for event in stream:
                seen.append(event)
                if len(seen) == 2:  # heard while the long one holds the only slot, then the long one goes
                    assert (adm.running, adm.queued) == (1, 1)
                    released = await release([long])
            final = await stream.get_final_response()
    cut_short(records, ids, "long")
    assert [e.type for e in seen[:3]] == ["response.created", "response.queued", "response.in_progress"]
    assert seen[0].response.status == "queued" and seen[2].response.status == "in_progress"
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert final.status == "completed" and final.output_text == "Queued, then answered."
    # admission held it back: it reached vLLM only after the long one's client left (vLLM's own record)
    assert record_of(records, final.id).scheduled_ts > released

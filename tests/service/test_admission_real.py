"""Instant start on the real engine (vLLM, tiny model): `response.created` reaches the client while the engine is
too busy to start the new response's generation; what vLLM would refuse up front is still a 400 when streamed; a
stream queued for admission opens at once (created `queued`, `response.queued`) and the SDK's helper reads it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.real import TINY, exactly, tiny_model_server
from tests.serving import LiveServer
from vllm_responses.config import Config

pytestmark = pytest.mark.engine

# vLLM runs two sequences at once; our admission lets more in, so a third response is admitted (and starts
# streaming) while vLLM still queues its generation behind the two running ones.
ENGINE_SEQS = 2
LONG = {"input": "Count.", "max_output_tokens": 1200, "ignore_eos": True}


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
    client: httpx.AsyncClient, name: str, body: dict[str, Any], log: list[tuple[str, str]]
) -> None:
    """Stream one response, appending (name, event type) to `log` as each event arrives."""
    async with client.stream("POST", "/v1/responses", json={"model": TINY, "stream": True, **body}) as r:
        assert r.status_code == 200, await r.aread()
        buffer = ""
        async for chunk in r.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                for line in frame.splitlines():
                    if line.startswith("data: "):
                        log.append((name, json.loads(line[6:])["type"]))


TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def first(log: list[tuple[str, str]], name: str, *kinds: str) -> int:
    return next(i for i, (n, k) in enumerate(log) if n == name and k in kinds)


async def test_created_arrives_before_the_first_token_on_a_busy_engine(busy_server: LiveServer) -> None:
    log: list[tuple[str, str]] = []
    async with httpx.AsyncClient(base_url=busy_server.base_url, timeout=300) as client:
        longs = [
            asyncio.ensure_future(follow(client, f"long{i}", LONG, log)) for i in range(ENGINE_SEQS)
        ]  # every sequence the engine runs at once is taken...
        async with asyncio.timeout(300):
            while not all((f"long{i}", "response.output_text.delta") in log for i in range(ENGINE_SEQS)):
                await asyncio.sleep(0.05)
        new = asyncio.ensure_future(follow(client, "new", {"input": "Hello.", "max_output_tokens": 16}, log))
        await asyncio.gather(*longs, new)
    ended = min(first(log, f"long{i}", *TERMINAL) for i in range(ENGINE_SEQS))
    assert [k for n, k in log if n == "long0"][-1] == "response.incomplete"  # cut at max_output_tokens
    events = [k for n, k in log if n == "new"]
    assert events[:2] == ["response.created", "response.in_progress"]
    assert events[-1] in TERMINAL[:2]
    # ...so the new response's generation could only start once one of them ended; its created and in_progress
    # came before that, and its first output after.
    assert first(log, "new", "response.in_progress") < ended
    new_output = next(i for i, (n, k) in enumerate(log) if n == "new" and k.startswith("response.output_"))
    assert new_output > ended


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
    `response.created` (queued) and `response.queued` at once; the SDK's stream helper reads it to the end, and
    its forced answer comes after `response.in_progress`."""
    adm = busy_server.app.state.vr.service.admission
    monkeypatch.setattr(adm, "max_running", 1)
    sdk = openai.AsyncOpenAI(base_url=busy_server.base_url + "/v1", api_key="unused", max_retries=0)
    log: list[tuple[str, str]] = []
    async with httpx.AsyncClient(base_url=busy_server.base_url, timeout=300) as client:
        long = asyncio.ensure_future(follow(client, "long", {**LONG, "max_output_tokens": 200}, log))
        async with asyncio.timeout(300):
            while ("long", "response.output_text.delta") not in log:
                await asyncio.sleep(0.05)
        seen: list[Any] = []
        sent = time.monotonic()
        forced = {"structured_outputs": [exactly("Queued, then answered.")], "temperature": 0}
        async with sdk.responses.stream(
            model=TINY, input="Hello.", max_output_tokens=64, extra_body=forced
        ) as stream:
            async for event in stream:
                if not seen:
                    first_s = time.monotonic() - sent
                seen.append(event)
                if len(seen) == 2:
                    assert ("long", "response.incomplete") not in log  # heard while the long one runs
            final = await stream.get_final_response()
        await long
    assert [e.type for e in seen[:3]] == ["response.created", "response.queued", "response.in_progress"]
    assert seen[0].response.status == "queued" and seen[2].response.status == "in_progress"
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert final.status == "completed" and final.output_text == "Queued, then answered."
    assert first_s < 5.0  # at once (loose: a loaded CI host), not after the long response's 200 tokens

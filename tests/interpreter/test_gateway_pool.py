"""The gateway over a real pool of one container (the fake engine writes the code): code turns beyond the pool
wait and complete; one that cannot get a container in time is a tool error and its response completes; the
Containers API answers the memory budget with a 400 and a full pool with a 429."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from interpreter_service.pool import WorkerPool
from tests.support.fakes import code_call, say
from tests.support.sandbox_service import pool_gateway
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.engine.types import GenerateRequest, Message, ToolResult

pytestmark = pytest.mark.sandbox

MODEL = "fake-model"
CODE_TOOL = [{"type": "code_interpreter", "container": {"type": "auto"}}]
OUTPUTS: list[Any] = ["code_interpreter_call.outputs"]


def coder(request: GenerateRequest) -> list[Any]:
    """Runs the user's text as code, then answers with what it printed."""
    results = [t for t in request.turns if isinstance(t, ToolResult)]
    if results:
        return say(f"The code said: {results[-1].output.strip()}")
    user = next(t for t in request.turns if isinstance(t, Message) and t.role == "user")
    return code_call(user.text)


@pytest.fixture(scope="module")
def server(dist_dir: Path) -> Iterator[LiveServer]:
    live = pool_gateway(dist_dir, max_workers=1, code_interpreter_timeout=20)
    live.engine.reset(coder)
    yield live
    live.stop()


@pytest.fixture
async def client(server: LiveServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="x", max_retries=0, timeout=280
    ) as sdk:
        yield sdk


async def test_code_turns_beyond_the_pool_wait_and_complete(client: openai.AsyncOpenAI) -> None:
    """Three responses at once on a pool of one container: each code call waits for the container of the
    one before to be free (after that response ended), then runs; all three complete."""
    codes = [f"import time\ntime.sleep(1)\nprint('answer {i}')" for i in range(3)]
    async with asyncio.timeout(290):
        responses = await asyncio.gather(
            *(
                client.responses.create(model=MODEL, input=code, tools=CODE_TOOL, include=OUTPUTS)
                for code in codes
            )  # type: ignore[arg-type]
        )
    for i, resp in enumerate(responses):
        body = resp.model_dump(mode="json", exclude_unset=True)
        validate_response(body)
        call, answer = body["output"]
        assert resp.status == "completed" and call["status"] == "completed", call
        assert call["outputs"] == [{"type": "logs", "logs": f"answer {i}\n"}]
        assert answer["content"][0]["text"] == f"The code said: answer {i}"
    assert len({r.output[0].container_id for r in responses}) == 3  # type: ignore[union-attr]


async def test_no_container_in_time_is_a_tool_error_and_the_response_completes(
    server: LiveServer, client: openai.AsyncOpenAI
) -> None:
    pool: WorkerPool = server.interpreter
    pool.queue_timeout_s = 2.0
    try:
        async with asyncio.timeout(280):
            holder = asyncio.create_task(
                client.responses.create(
                    model=MODEL, input="import time\ntime.sleep(8)\nprint('held')", tools=CODE_TOOL
                )  # type: ignore[arg-type]
            )
            while pool.stats()["containers_busy"] == 0:  # the first response's code is running
                await asyncio.sleep(0.1)
            late = await client.responses.create(
                model=MODEL, input="print('late')", tools=CODE_TOOL, include=OUTPUTS
            )  # type: ignore[arg-type]
            first = await holder
    finally:
        pool.queue_timeout_s = 120
    body = late.model_dump(mode="json", exclude_unset=True)
    validate_response(body)
    assert late.status == "completed" and late.error is None
    call, answer = body["output"]
    assert (
        call["type"] == "code_interpreter_call" and call["status"] == "failed" and call["container_id"] == ""
    )
    (logs,) = call["outputs"]
    assert "The code was not run: no code-interpreter container became free within 2 s" in logs["logs"]
    assert answer["content"][0]["text"].startswith("The code said: The code was not run")
    assert first.status == "completed" and first.output[0].status == "completed"  # type: ignore[union-attr]


def test_containers_api_memory_budget_is_400_and_a_full_pool_is_429(server: LiveServer) -> None:
    pool: WorkerPool = server.interpreter
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
    for tier, reason in (("16g", "32-bit WebAssembly"), ("4g", "whole memory budget")):
        with pytest.raises(openai.BadRequestError) as ei:
            client.containers.create(name="big", memory_limit=tier)  # type: ignore[arg-type]
        error = ei.value.body
        assert error["param"] == "memory_limit" and error["type"] == "invalid_request_error"  # type: ignore[index]
        assert reason in error["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as ei:
        client.responses.create(
            model=MODEL,
            input="1",
            tools=[{"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "64g"}}],
        )
    assert ei.value.body["param"] == "tools[0].container.memory_limit"  # type: ignore[index]
    held = client.containers.create(name="held")
    pool.pin(held.id)  # in use between calls (as a running response's is): not evictable
    pool.queue_timeout_s = 1.0
    try:
        with pytest.raises(openai.RateLimitError) as rl:
            client.containers.create(name="waits")
        assert rl.value.body["code"] == "pool_exhausted"  # type: ignore[index]
    finally:
        pool.queue_timeout_s = 120
        pool.unpin(held.id)
        client.containers.delete(held.id)

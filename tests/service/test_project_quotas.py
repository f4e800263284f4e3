"""Projects cannot evict or exhaust each other: a full sandbox pool makes room for a project from its own idle
containers only, and each project is bounded in live containers, sandbox memory and stored bytes (a real
server over the real `WorkerPool` with stand-in workers, two projects of a keys file, the `openai` SDK)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from websockets.sync.client import connect

from tests.interpreter.scripted import ScriptedPool
from tests.support.fakes import FakeEngine, code_call, say
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.store.memory import MemoryStore

MODEL = "fake-model"
KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"
OUTPUTS: Any = ["code_interpreter_call.outputs"]


def _server(tmp: Path, a_bounds: dict[str, int], **pool: Any) -> LiveServer:
    entries = [
        {"key": KEY_A, "project": "proj_a", **a_bounds},
        {"sha256": hashlib.sha256(KEY_B.encode()).hexdigest(), "project": "proj_b"},
    ]
    write_keys_file(tmp / "keys.json", entries)

    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        p = ScriptedPool(tmp, workers=1, spares=0, memory_limit="256m", js_heap_mb=64, **pool)
        await p.start()
        try:
            yield FakeEngine(), p, MemoryStore()
        finally:
            await p.aclose()

    return LiveServer(Config(api_keys_file=str(tmp / "keys.json")), None, None, opener=opener).start()


def _sdk(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def _run(server: LiveServer, client: openai.OpenAI, container: str, code: str) -> str:
    """Run `code` in `container` through a response; what it printed."""
    server.engine.reset(code_call(code), say("Done."))
    tools: Any = [{"type": "code_interpreter", "container": container}]
    done = client.responses.create(model=MODEL, input="run", tools=tools, include=OUTPUTS)
    call = next(it for it in done.output if it.type == "code_interpreter_call")
    return "".join(o.logs for o in call.outputs or [] if o.type == "logs")


@pytest.fixture
def full_pool(tmp_path: Path) -> Iterator[LiveServer]:
    """A pool of two containers at most; waiting for room lasts half a second."""
    live = _server(tmp_path, {}, max_workers=2, queue_timeout_s=0.5)
    yield live
    live.stop()


def test_a_full_pool_never_evicts_another_projects_idle_container(full_pool: LiveServer) -> None:
    a, b = _sdk(full_pool, KEY_A), _sdk(full_pool, KEY_B)
    kept = b.containers.create(name="b's")
    _run(full_pool, b, kept.id, "x = 41")
    mine = a.containers.create(name="a's")  # the pool is full now; b's is the least recently used
    second = a.containers.create(name="a's second")  # room comes from a's own idle container
    assert [c.id for c in a.containers.list().data] == [second.id] and mine.id != second.id
    assert _run(full_pool, b, kept.id, "print(x + 1)") == "42\n"  # b's container and its state survive
    other = b.containers.create(name="b's second")  # b's own idle one makes room for b
    assert [c.id for c in b.containers.list().data] == [other.id]
    assert [c.id for c in a.containers.list().data] == [second.id]


def test_a_project_with_nothing_of_its_own_to_evict_gets_a_429(full_pool: LiveServer) -> None:
    a, b = _sdk(full_pool, KEY_A), _sdk(full_pool, KEY_B)
    held = [b.containers.create(name=f"b{i}") for i in range(2)]
    _run(full_pool, b, held[0].id, "y = 'still here'")
    with pytest.raises(openai.RateLimitError) as refused:
        a.containers.create(name="a's")
    assert refused.value.code == "pool_exhausted"
    assert sorted(c.id for c in b.containers.list().data) == sorted(c.id for c in held)
    assert _run(full_pool, b, held[0].id, "print(y)") == "still here\n"


@pytest.fixture
def bounded(tmp_path: Path) -> Iterator[LiveServer]:
    """Project a may hold one container, 512 MiB of sandbox memory and 30 kB of stored data; b has no bound."""
    bounds = {"max_containers": 1, "max_sandbox_memory_mb": 512, "max_stored_bytes": 30_000}
    live = _server(tmp_path, bounds, max_workers=8, queue_timeout_s=0.5)
    yield live
    live.stop()


def test_a_projects_container_cap_holds_and_leaves_others_alone(bounded: LiveServer) -> None:
    a, b = _sdk(bounded, KEY_A), _sdk(bounded, KEY_B)
    first = a.containers.create(name="a1")
    second = a.containers.create(name="a2")  # its cap is one: its own idle one goes
    assert [c.id for c in a.containers.list().data] == [second.id] and first.id != second.id
    bounded.interpreter.pin(second.id)  # in use (as a running response's is): nothing of a's to evict
    try:
        with pytest.raises(openai.RateLimitError) as refused:
            a.containers.create(name="a3")
        assert refused.value.code == "container_quota_exceeded"
    finally:
        bounded.interpreter.unpin(second.id)
    made = [b.containers.create(name=f"b{i}") for i in range(3)]  # b is not held to a's cap
    assert len(b.containers.list().data) == 3 and all(c.id for c in made)
    with pytest.raises(openai.BadRequestError) as too_big:  # alone more than a's sandbox memory
        a.containers.create(name="big", memory_limit="1g")  # type: ignore[arg-type]
    assert too_big.value.status_code == 400


def test_a_projects_stored_bytes_are_bounded_over_http_and_websocket(bounded: LiveServer) -> None:
    a, b = _sdk(bounded, KEY_A), _sdk(bounded, KEY_B)
    bounded.engine.reset(say("ok"))
    text = "x" * 4000
    with pytest.raises(openai.RateLimitError) as refused:
        for _ in range(10):  # each keeps its input twice (input items and history): about 8 kB
            a.responses.create(model=MODEL, input=text)
    assert refused.value.code == "storage_quota_exceeded"
    with pytest.raises(openai.BadRequestError) as too_big:
        a.responses.create(model=MODEL, input="y" * 40_000)
    assert too_big.value.code == "storage_quota_exceeded"
    a.responses.create(model=MODEL, input=text, store=False)  # not kept: not bounded
    with pytest.raises(openai.RateLimitError):
        a.conversations.create(items=[{"type": "message", "role": "user", "content": text}])
    url = f"ws://127.0.0.1:{bounded.port}/v1/responses"
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY_A}"}) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": text, "generate": False}))
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] == "error" and event["error"]["code"] == "storage_quota_exceeded"
    for _ in range(10):  # b keeps what it likes: a's bound is a's
        assert b.responses.create(model=MODEL, input=text).status == "completed"
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY_B}"}) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": text, "generate": False}))
        assert json.loads(ws.recv(timeout=30))["type"] == "response.created"

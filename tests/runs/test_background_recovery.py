"""Background responses are stored when acknowledged, and a restart marks those left running failed (a kill -9
of a real `vllm-responses serve` included), so they are found, never a 404; on SQLite and on a real Postgres."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.real import TINY
from tests.support.serving import LiveServer, free_port
from vllm_responses.config import Config
from vllm_responses.runs.records import INTERRUPTED_CODE, INTERRUPTED_MESSAGE
from vllm_responses.store.open import store_for

MODEL = "fake-model"


def _stored(db: str, response_id: str) -> dict | None:
    """The response as the database holds it, read through a connection of its own."""

    async def read() -> dict | None:
        store = store_for(db)
        await store.open()
        try:
            record = await store.get(response_id)
            return None if record is None else dict(record.response)
        finally:
            await store.aclose()

    return asyncio.run(read())


@pytest.fixture
def db(durable_db: str) -> str:
    return durable_db  # a SQLite file, then a Postgres database


def _server(db: str, engine: FakeEngine | None = None) -> LiveServer:
    return LiveServer(Config(), engine or FakeEngine(), FakeInterpreter(), db=db).start()


def test_a_background_response_is_stored_when_acknowledged(db: str) -> None:
    engine = FakeEngine()
    engine.reset(say("slow " * 200), delay=0.05)  # ~10 s of output
    server = _server(db, engine)
    try:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0)
        r = client.responses.create(model=MODEL, input="take your time", background=True)
        assert r.status in ("queued", "in_progress")
        stored = _stored(db, r.id)  # in the file already, as the client was told
        assert stored is not None and stored["status"] in ("queued", "in_progress"), stored
        assert [i.id for i in client.responses.input_items.list(r.id)]  # its input is kept with it
        cancelled = client.responses.cancel(r.id)
        assert cancelled.status == "cancelled"
        stored = _stored(db, r.id)
        assert stored is not None and stored["status"] == "cancelled"
        # a foreground response is written once, when it ends
        engine.reset(say("quick"))
        done = client.responses.create(model=MODEL, input="hi")
        stored = _stored(db, done.id)
        assert stored is not None and stored["status"] == "completed"
    finally:
        server.stop()


def test_a_restart_marks_responses_left_running_failed(db: str) -> None:
    async def leave_running() -> tuple[str, str]:
        """Two responses as a crashed process leaves them: acknowledged, never ended."""
        from tests.support.fakes import echo_fields
        from vllm_responses.builder.response import ResponseBuilder
        from vllm_responses.runs.records import response_record
        from vllm_responses.runs.run import Run

        store = store_for(db)
        await store.open()
        ids = []
        for text in ("one", "two"):
            run = Run(ResponseBuilder(echo_fields(background=True), include_outputs=False), background=True)
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            await store.save(response_record(run, False, [], [{**item, "id": f"msg_{text}"}]))
            ids.append(run.id)
        await store.aclose()
        return ids[0], ids[1]

    first, second = asyncio.run(leave_running())
    server = _server(db)
    try:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0)
        for rid in (first, second):
            got = client.responses.retrieve(rid)
            assert got.status == "failed" and got.error is not None
            assert (got.error.code, got.error.message) == (INTERRUPTED_CODE, INTERRUPTED_MESSAGE)
            assert [i.id for i in client.responses.input_items.list(rid)] == [
                "msg_one" if rid == first else "msg_two"
            ]
            with pytest.raises(openai.ConflictError):  # it no longer runs: nothing to cancel
                client.responses.cancel(rid)
        # a failed response can still be continued from, and deleted
        assert (
            client.responses.create(model=MODEL, previous_response_id=first, input="again").status
            == "completed"
        )
        client.responses.delete(second)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(second)
    finally:
        server.stop()


# --- the real thing: kill -9 of `vllm-responses serve` and a restart on the same file ----------------


def _serve(db: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    from vllm_responses.engine.models import tiny_model_path

    model = tiny_model_path()
    if not (model / "config.json").is_file():
        pytest.fail(f"the tiny model is missing at {model}: run scripts/setup.sh")
    argv = [
        sys.executable, "-m", "vllm_responses", "serve", "--model", str(model), "--served-model-name", TINY,
        "--tool-call-parser", "hermes", "--max-model-len", "4096", "--db", db, "--port", str(port),
        "--no-code-interpreter", "--log-level", "warning",
        "--replica-id", "serve-under-test",  # restarted under its name: its leftovers fail at start, not after the lease
    ]  # fmt: skip
    # its own session: the kill reaches vLLM's engine-core child too, as a crash of the whole server would
    with log.open("ab") as out:  # the child has its own copy of the file
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_up(proc: subprocess.Popen[bytes], base: str, log: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail("the server did not start")


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


@pytest.mark.engine
@pytest.mark.slow
def test_a_background_response_survives_a_kill_9_as_failed(
    tmp_path: Path, db: str, servers: list[subprocess.Popen[bytes]]
) -> None:
    """On SQLite, and on Postgres: a real `vllm-responses serve --db postgresql://...` (the CLI's path)."""
    log, port = tmp_path / "serve.log", free_port()
    base = f"http://127.0.0.1:{port}"
    servers.append(_serve(db, port, log))
    _wait_up(servers[0], base, log)
    client = openai.OpenAI(base_url=base + "/v1", api_key="-", max_retries=0, timeout=60)
    r = client.responses.create(
        model=TINY, input="Count to a million.", background=True, max_output_tokens=4000,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    assert r.status in ("queued", "in_progress")
    assert client.responses.retrieve(r.id).status in ("queued", "in_progress")  # still running
    os.killpg(servers[0].pid, signal.SIGKILL)
    servers[0].wait(timeout=60)

    servers.append(_serve(db, port, log))
    _wait_up(servers[1], base, log)
    got = client.responses.retrieve(r.id)  # not a 404
    assert got.status == "failed", got
    assert got.error is not None and got.error.code == INTERRUPTED_CODE and "restarted" in got.error.message
    assert [i.type for i in client.responses.input_items.list(r.id)] == ["message"]
    with pytest.raises(openai.ConflictError):
        client.responses.cancel(r.id)
    fresh = client.responses.create(model=TINY, input="hi", max_output_tokens=16)  # and the server works
    assert fresh.status in ("completed", "incomplete")

"""Scale-out on real parts: one Postgres, one shared sandbox service and two gateway replicas (`vllm-responses
serve` processes on the tiny model) on 127.0.0.1, driven through the openai SDK across the replicas.

The replicas are real `python -m vllm_responses serve` subprocesses (the CLI's path: `--db postgresql://...`,
`--code-interpreter-url`, `--code-interpreter-token`), each with its own vLLM engine; outputs are forced with the
`structured_outputs` extension."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseCodeInterpreterToolCall

from tests.runs.test_replicas import _eventually
from tests.support.postgres import PostgresServer
from tests.support.real import TINY, exactly, hermes_call
from tests.support.sandbox_service import SandboxService
from tests.support.serving import free_port
from vllm_responses.runs.records import INTERRUPTED_CODE

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

TOKEN = "replica-test-token"
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]
# Heartbeats every 0.5 s. 4 s proved too short under a full CI run on 2 cores: B's sweep failed a background
# response A had just created (2 s old) as abandoned, once, and once found A's kill later than 39 s.
LEASE_S = 8


class Replica:
    """One `vllm-responses serve` process (its own session: a kill -9 takes its engine core with it)."""

    def __init__(
        self, name: str, db: str, sandbox_url: str, log_dir: Path, extra: tuple[str, ...] = ()
    ) -> None:
        from vllm_responses.engine.models import tiny_model_path

        model = tiny_model_path()
        if not (model / "config.json").is_file():
            pytest.fail(f"the tiny model is missing at {model}: run scripts/setup.sh")
        self.name, self.port, self.log = name, free_port(), log_dir / f"{name}.log"
        argv = [
            sys.executable, "-m", "vllm_responses", "serve", "--model", str(model), "--served-model-name", TINY,
            "--tool-call-parser", "hermes", "--max-model-len", "4096", "--db", db, "--port", str(self.port),
            "--code-interpreter-url", sandbox_url, "--log-level", "warning", *extra,
        ]  # fmt: skip
        env = {**os.environ, "VLLM_RESPONSES_CODE_INTERPRETER_TOKEN": TOKEN}
        with self.log.open("ab") as out:  # the child has its own copy of the file
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base + "/v1", api_key="-", max_retries=0, timeout=300)

    def wait_up(self, timeout: float = 600) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"replica {self.name} exited with {self.proc.returncode}:\n{self.log.read_text()[-4000:]}"
                )
            try:
                if httpx.get(self.base + "/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        pytest.fail(f"replica {self.name} did not start:\n{self.log.read_text()[-4000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def database(postgres_server: PostgresServer) -> Iterator[str]:
    """A database of its own on the session's Postgres server, for the module's replicas."""

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(postgres_server.url())
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin("CREATE DATABASE replicas"))
    yield postgres_server.url("replicas")
    asyncio.run(admin("DROP DATABASE replicas WITH (FORCE)"))


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxService]:
    service = SandboxService(TOKEN, workers=2).start()
    yield service
    service.stop()


@pytest.fixture(scope="module")
def replicas(
    database: str, sandbox: SandboxService, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Replica]]:
    logs = tmp_path_factory.mktemp("replicas")
    lease = ("--replica-heartbeat", "0.5", "--replica-lease", str(LEASE_S))
    started = {
        name: Replica(name, database, sandbox.url, logs, ("--replica-id", name, *lease))
        for name in ("a", "b")
    }
    try:
        for replica in started.values():  # both engines load at once
            replica.wait_up()
        yield started
    finally:
        for replica in started.values():
            replica.kill()


def code_turn(code: str, answer: str) -> dict[str, Any]:
    return {"structured_outputs": [exactly(hermes_call(code)), exactly(answer)]}


def test_created_on_a_continued_retrieved_and_deleted_on_b(replicas: dict[str, Replica]) -> None:
    a, b = replicas["a"].client(), replicas["b"].client()
    first = a.responses.create(
        model=TINY,
        input="Set x to 6*7.",
        tools=CI,  # type: ignore[arg-type]
        include=["code_interpreter_call.outputs"],
        extra_body=code_turn("x = 6 * 7\nprint(x)", "x is 42."),
    )
    assert first.status == "completed" and first.output_text == "x is 42."
    call1 = next(i for i in first.output if isinstance(i, ResponseCodeInterpreterToolCall))

    # B answers for A's response, and continues it in the same container (on the shared sandbox service).
    assert b.responses.retrieve(first.id).output_text == "x is 42."
    assert [i.type for i in b.responses.input_items.list(first.id)] == ["message"]
    second = b.responses.create(
        model=TINY,
        input="Add one.",
        tools=CI,  # type: ignore[arg-type]
        include=["code_interpreter_call.outputs"],
        previous_response_id=first.id,
        extra_body=code_turn("print(x + 1)", "43."),
    )
    call2 = next(i for i in second.output if isinstance(i, ResponseCodeInterpreterToolCall))
    assert call2.container_id == call1.container_id  # one container, used from both replicas
    assert call2.outputs and any(o.type == "logs" and o.logs.strip() == "43" for o in call2.outputs), call2
    assert a.responses.retrieve(second.id).previous_response_id == first.id

    b.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(first.id)


def long_one(client: openai.OpenAI) -> Response:
    """A background response that runs for a long while (4000 tokens, EOS ignored)."""
    return client.responses.create(
        model=TINY, input="Count to a million.", background=True, max_output_tokens=4000,
        extra_body={"ignore_eos": True},
    )  # fmt: skip


def test_a_background_response_running_on_a_is_cancelled_through_b(replicas: dict[str, Replica]) -> None:
    """Up to three tries: on a host loaded by other work the response (4000 tokens, the tiny model's whole
    context) may end before the cancel reaches it; one of them must be cancelled."""
    a, b = replicas["a"].client(), replicas["b"].client()
    cancelled: Response | None = None
    for _ in range(3):
        r = long_one(a)
        assert b.responses.retrieve(r.id).status in ("queued", "in_progress")
        try:
            cancelled = b.responses.cancel(r.id)
        except openai.ConflictError:  # it ended before the cancel was asked: try again
            continue
        if cancelled.status == "cancelled":
            break
        assert cancelled.status in ("completed", "incomplete"), cancelled  # it ended first: try again
    assert cancelled is not None and cancelled.status == "cancelled"
    assert a.responses.retrieve(r.id).status == "cancelled"


def test_kill_9_of_a_mid_response_b_fails_its_response_within_the_lease(replicas: dict[str, Replica]) -> None:
    """Last in the module: it kills replica A."""
    a, b = replicas["a"].client(), replicas["b"].client()
    r = long_one(a)
    assert b.responses.retrieve(r.id).status in ("queued", "in_progress")
    replicas["a"].kill()
    took = _eventually(lambda: b.responses.retrieve(r.id).status == "failed", LEASE_S + 5 + 30)
    print(f"replica A killed: B failed its response {took:.2f} s later (lease {LEASE_S} s)")
    got = b.responses.retrieve(r.id)
    assert got.error is not None and got.error.code == INTERRUPTED_CODE
    assert b.responses.create(model=TINY, input="hi", max_output_tokens=16).status in (
        "completed",
        "incomplete",
    )

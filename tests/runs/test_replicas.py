"""Several gateway replicas on one database (a real Postgres, and a SQLite file two processes share): a
response created on one is read, continued, cancelled and deleted through another; a starting replica leaves
another's running responses be; a replica killed with SIGKILL has its responses marked failed by the others
within the lease; a Postgres restart costs no request a 500."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest
from openai.types.responses import Response

from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.runs.records import INTERRUPTED_CODE

MODEL = "fake-model"
HEARTBEAT, LEASE = 0.2, 2.0  # fast for the tests; the defaults are 2 s and 20 s


def _replica(db: str, engine: FakeEngine | None = None, **config: object) -> LiveServer:
    cfg = Config(**{"replica_heartbeat": HEARTBEAT, "replica_lease": LEASE, **config})  # type: ignore[arg-type]
    return LiveServer(cfg, engine or FakeEngine(), FakeInterpreter(), db=db).start()


def _client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0, timeout=60)


def _slow_engine() -> FakeEngine:
    engine = FakeEngine()
    engine.reset(say("slow " * 1000), delay=0.05)  # ~50 s of output unless cancelled
    return engine


def _eventually(check: Callable[[], bool], within_s: float) -> float:
    """Seconds until `check()` held (fails past `within_s`)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < within_s, f"not within {within_s} s"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def servers() -> Iterator[list[LiveServer]]:
    started: list[LiveServer] = []
    yield started
    for server in started:
        server.stop()


def test_cancel_through_another_replica(durable_db: str, servers: list[LiveServer]) -> None:
    servers += [_replica(durable_db, _slow_engine()), _replica(durable_db)]
    a, b = (_client(s) for s in servers)
    r = a.responses.create(model=MODEL, input="take your time", background=True)
    assert b.responses.retrieve(r.id).status in ("queued", "in_progress")
    start = time.monotonic()
    cancelled = b.responses.cancel(r.id)
    delay = time.monotonic() - start
    print(f"cancel through another replica answered in {delay:.2f} s (heartbeat {HEARTBEAT} s)")
    assert isinstance(cancelled, Response) and cancelled.id == r.id and cancelled.status == "cancelled"
    assert a.responses.retrieve(r.id).status == "cancelled"
    assert b.responses.retrieve(r.id).status == "cancelled"
    # as a local cancel: a response that no longer runs is a 409 (through either), an unknown one a 404
    with pytest.raises(openai.ConflictError):
        b.responses.cancel(r.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.cancel("resp_nope")
    servers[0].engine.reset(say("done"))
    done = a.responses.create(model=MODEL, input="quick", background=True)
    _eventually(lambda: b.responses.retrieve(done.id).status == "completed", 30)
    with pytest.raises(openai.ConflictError):
        b.responses.cancel(done.id)


def test_a_starting_replica_leaves_a_running_response_be(durable_db: str, servers: list[LiveServer]) -> None:
    servers.append(_replica(durable_db, _slow_engine()))
    a = _client(servers[0])
    r = a.responses.create(model=MODEL, input="take your time", background=True)
    servers.append(_replica(durable_db))  # its start-up sweep, then its heartbeats, run while r runs on A
    b = _client(servers[1])
    time.sleep(2 * LEASE)  # past a lease: only A's renewals keep r alive
    assert b.responses.retrieve(r.id).status == "in_progress"
    assert a.responses.retrieve(r.id).status == "in_progress"
    assert a.responses.cancel(r.id).status == "cancelled"


def test_continuing_a_response_still_running_elsewhere_is_a_400(
    durable_db: str, servers: list[LiveServer]
) -> None:
    """As on the replica that runs it: its stored record is not a finished conversation to build on."""
    servers += [_replica(durable_db, _slow_engine()), _replica(durable_db)]
    a, b = (_client(s) for s in servers)
    r = a.responses.create(model=MODEL, input="take your time", background=True)
    for client in (a, b):
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model=MODEL, previous_response_id=r.id, input="next")
        assert refused.value.body["param"] == "previous_response_id"  # type: ignore[index]
        assert "still in progress" in refused.value.body["message"]  # type: ignore[index]
    assert b.responses.cancel(r.id).status == "cancelled"
    servers[1].engine.reset(say("continued"))
    assert b.responses.create(model=MODEL, previous_response_id=r.id, input="next").status == "completed"


def test_read_continue_delete_across_replicas(durable_db: str, servers: list[LiveServer]) -> None:
    servers += [_replica(durable_db), _replica(durable_db)]
    a, b = (_client(s) for s in servers)
    first = a.responses.create(model=MODEL, input="hello from A")
    got = b.responses.retrieve(first.id)
    assert got.status == "completed" and got.output_text == first.output_text
    assert [i.id for i in b.responses.input_items.list(first.id)] == [
        i.id for i in a.responses.input_items.list(first.id)
    ]
    second = b.responses.create(model=MODEL, previous_response_id=first.id, input="and on B")
    assert second.status == "completed"
    assert "hello from A" in str(servers[1].engine.requests[-1].turns)  # B's model saw A's conversation
    b.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(first.id)
    assert a.responses.retrieve(second.id).previous_response_id == first.id


def test_delete_through_another_replica_stops_the_run(durable_db: str, servers: list[LiveServer]) -> None:
    servers += [_replica(durable_db, _slow_engine()), _replica(durable_db)]
    a, b = (_client(s) for s in servers)
    r = a.responses.create(model=MODEL, input="take your time", background=True)
    b.responses.delete(r.id)
    run = servers[0].app.state.vr.service.runs.get(r.id)
    _eventually(lambda: run is None or run.done.is_set(), 10 * HEARTBEAT + 10)  # A stopped running it
    time.sleep(2 * HEARTBEAT)
    for client in (a, b):  # and it was not stored again when it ended
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(r.id)


# --- a replica killed with SIGKILL (a process of its own, tests/support/replica_proc.py) ----------------------------


def _spawn(db: str, replica_id: str, lease: float, log: Path) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "tests.support.replica_proc", db, replica_id, str(lease)]
    with log.open("w") as err:  # the child has its own copy of the file
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    base = proc.stdout.readline().strip()
    assert base.startswith("http://"), log.read_text()[-3000:]
    return proc, base


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.stdout is not None
    proc.stdout.close()


def test_a_killed_replicas_response_is_failed_within_the_lease(
    durable_db: str, servers: list[LiveServer], tmp_path: Path
) -> None:
    proc, base = _spawn(durable_db, "doomed", LEASE, tmp_path / "a.log")
    try:
        a = openai.OpenAI(base_url=base + "/v1", api_key="-", max_retries=0)
        r = a.responses.create(model=MODEL, input="take your time", background=True)
        servers.append(_replica(durable_db))
        b = _client(servers[0])
        # acknowledged `queued`, then running: A is alive, its lease holds
        _eventually(lambda: b.responses.retrieve(r.id).status == "in_progress", 10)
    finally:
        _kill(proc)
    took = _eventually(lambda: b.responses.retrieve(r.id).status == "failed", LEASE + 10 * HEARTBEAT + 20)
    print(f"marked failed {took:.2f} s after the kill (lease {LEASE} s, heartbeat {HEARTBEAT} s)")
    got = b.responses.retrieve(r.id)
    assert got.error is not None and got.error.code == INTERRUPTED_CODE and "stopped" in got.error.message
    assert [i.type for i in b.responses.input_items.list(r.id)] == ["message"]  # nothing stored is lost
    with pytest.raises(openai.ConflictError):
        b.responses.cancel(r.id)


def test_a_replica_restarted_under_its_name_fails_its_leftovers_at_once(
    durable_db: str, servers: list[LiveServer], tmp_path: Path
) -> None:
    proc, base = _spawn(
        durable_db, "steady", 3600.0, tmp_path / "a.log"
    )  # a lease that would outlive the test
    try:
        a = openai.OpenAI(base_url=base + "/v1", api_key="-", max_retries=0)
        r = a.responses.create(model=MODEL, input="take your time", background=True)
    finally:
        _kill(proc)
    servers.append(_replica(durable_db, replica_id="steady", replica_lease=3600.0))
    got = _client(servers[0]).responses.retrieve(r.id)  # its start-up sweep failed it, lease or not
    assert got.status == "failed" and got.error is not None and got.error.code == INTERRUPTED_CODE


# --- foreground responses on a shared store (Postgres): recorded when they start -----------------------------


def test_a_foreground_response_running_on_a_is_seen_from_b(pg_url: str, servers: list[LiveServer]) -> None:
    """Streamed (not background) on A: B retrieves it `in_progress` and lists its input, cancel through B is a
    409 as on A, and B sees it `completed` once A's stream ends."""
    servers += [_replica(pg_url, _slow_engine()), _replica(pg_url)]
    a, b = (_client(s) for s in servers)
    servers[0].engine.reset(say("slow " * 60), delay=0.05)  # ~3 s of output
    with a.responses.create(model=MODEL, input="stream it", stream=True) as stream:
        rid = next(iter(stream)).response.id  # response.created
        running = b.responses.retrieve(rid)
        assert running.status == "in_progress" and running.background is False
        assert [i.type for i in b.responses.input_items.list(rid)] == ["message"]
        with pytest.raises(openai.ConflictError):
            b.responses.cancel(rid)
        ended = [event.type for event in stream]
    assert ended[-1] == "response.completed"
    done = b.responses.retrieve(rid)
    assert done.status == "completed" and done.output_text.startswith("slow")


def test_a_killed_replicas_foreground_response_is_failed(
    pg_url: str, servers: list[LiveServer], tmp_path: Path
) -> None:
    """A dies mid-stream: its stored foreground response is failed by B within the lease, as a background
    one is (before, it was never stored: a 404 for good)."""
    proc, base = _spawn(pg_url, "doomed-fg", LEASE, tmp_path / "a.log")
    servers.append(_replica(pg_url))
    b = _client(servers[0])
    try:
        a = openai.OpenAI(base_url=base + "/v1", api_key="-", max_retries=0, timeout=60)
        stream = a.responses.create(model=MODEL, input="take your time", stream=True)
        rid = next(iter(stream)).response.id
        assert b.responses.retrieve(rid).status == "in_progress"
    finally:
        _kill(proc)
    _eventually(lambda: b.responses.retrieve(rid).status == "failed", LEASE + 10 * HEARTBEAT + 20)
    got = b.responses.retrieve(rid)
    assert got.error is not None and got.error.code == INTERRUPTED_CODE


# --- the real thing: two `vllm-responses serve` on the tiny model and one Postgres ----------------------------


def test_a_queued_response_is_seen_running_from_another_replica_once_admitted(
    durable_db: str, servers: list[LiveServer]
) -> None:
    """A background response queued on A (its one slot taken) is `queued` to B, then `in_progress` once A
    admits it: its record is written again at admission, not only when it ends."""
    servers += [_replica(durable_db, _slow_engine(), max_concurrent_responses=1), _replica(durable_db)]
    a, b = (_client(s) for s in servers)
    first = a.responses.create(model=MODEL, input="take your time", background=True)
    waiting = a.responses.create(model=MODEL, input="after it", background=True)
    assert waiting.status == "queued" and b.responses.retrieve(waiting.id).status == "queued"
    a.responses.cancel(first.id)  # its slot goes to the queued one
    _eventually(lambda: b.responses.retrieve(waiting.id).status == "in_progress", 10)
    assert a.responses.cancel(waiting.id).status == "cancelled"
    _eventually(lambda: b.responses.retrieve(waiting.id).status == "cancelled", 10)

"""Re-streaming across replicas with the real engine: a real `vllm-responses serve --db postgresql://...` (the
tiny model) runs a background response, a second replica on the same database (fake engine: it runs nothing)
re-streams it from the store while it runs, the very frames the first one sent. A's vLLM processes are held
(SIGSTOP) from its first event until B has caught up with the stored stream, so B certainly follows a response
that is still running, whatever the host's scheduling; then A goes on and B streams the rest live."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import psutil
import pytest

from tests.runs.test_background_recovery import _serve, _wait_up
from tests.runs.test_restream_replicas import Frames
from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.real import TINY
from tests.support.serving import LiveServer, free_port
from tests.support.wire import check_stream, validate_event
from vllm_responses.config import Config


@pytest.fixture
def serve_a(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    log, port = tmp_path / "serve.log", free_port()
    proc = _serve(pg_url, port, log)
    try:
        _wait_up(proc, f"http://127.0.0.1:{port}", log)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


def _record_reads(server: LiveServer) -> list[bool]:
    """Each non-empty read of stored events `server` makes, as whether it caught up with a running response:
    it found fewer events than it asked for (all there were), the terminal one not among them."""
    reads: list[bool] = []
    events_after = server.store.events_after

    async def recording(response_id: str, after: int, limit: int) -> list[tuple[int, str]]:
        rows = await events_after(response_id, after, limit)
        if rows:
            ended = any(json.loads(text)["type"] == "response.incomplete" for _, text in rows)
            reads.append(len(rows) < limit and not ended)
        return rows

    server.store.events_after = recording  # type: ignore[method-assign]
    return reads


@contextmanager
def _held(server: subprocess.Popen[bytes]) -> Iterator[None]:
    """`server`'s child processes (vLLM's engine core and its worker) stopped, then continued: its generation
    waits while its API process (the parent) goes on storing and serving what it has."""
    children = psutil.Process(server.pid).children(recursive=True)
    assert children, "the server has no engine process"
    for child in children:
        child.suspend()
    try:
        yield
    finally:
        for child in children:
            child.resume()


def _wait(reads: list[bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not any(reads) and time.monotonic() < deadline:
        time.sleep(0.05)
    return any(reads)


@pytest.mark.engine
@pytest.mark.slow
def test_a_real_response_is_restreamed_by_another_replica(
    pg_url: str, serve_a: tuple[str, subprocess.Popen[bytes]]
) -> None:
    a_url, a_proc = serve_a
    b = LiveServer(Config(), FakeEngine(), FakeInterpreter(), db=pg_url)
    reads = _record_reads(b)
    b.start()  # after A: see test_restream_replicas
    try:
        _restream_once(a_url, a_proc, b.base_url, reads)
    finally:
        b.stop()


def _restream_once(serve_a: str, a_proc: subprocess.Popen[bytes], b_url: str, reads: list[bool]) -> None:
    """A runs a background response of 3,000 tokens; B re-streams it from the start (raw frames) and from
    `starting_after=3` (the SDK): the very frames A sent."""
    mine = Frames(
        "POST",
        serve_a + "/v1/responses",
        json={
            "model": TINY, "input": "Count to a thousand.", "background": True, "stream": True,
            "max_output_tokens": 3000, "ignore_eos": True,
        },
    )  # fmt: skip
    assert mine.first.wait(300) and mine.data, "A sent nothing"
    rid = json.loads(mine.data[0])["response"]["id"]
    with _held(a_proc):
        from_start = Frames("GET", f"{b_url}/v1/responses/{rid}", params={"stream": "true"})
        # B followed a running response: a read of the stored events caught up with A (fewer than it asked
        # for, none terminal) while A's generation was held
        assert _wait(reads), "B never caught up with A while A's generation was held"
    client_b = openai.OpenAI(base_url=b_url + "/v1", api_key="-", max_retries=0, timeout=300)
    with client_b.responses.retrieve(rid, stream=True, starting_after=3) as stream:
        sdk_events = list(stream)
    a_events, b_events = mine.join(), from_start.join()
    check_stream(a_events)
    check_stream(b_events)
    assert from_start.data == mine.data  # the frames A sent, byte for byte
    assert a_events[-1]["type"] == "response.incomplete"  # 3000 tokens, ignore_eos
    assert len(a_events) > 1000
    assert [e.model_dump(mode="json") for e in sdk_events] == [
        validate_event(e).model_dump(mode="json") for e in a_events[4:]
    ]
    _print_delay(mine, from_start)


def _print_delay(mine: Frames, from_start: Frames) -> None:
    """The delay B's client saw (printed for docs/store.md, not asserted): each live event's arrival on B
    after its arrival on A, in order, and sorted."""
    first_b = from_start.at[0]
    live = [(tb - ta) * 1000 for ta, tb in zip(mine.at, from_start.at, strict=True) if tb > first_b]
    lag, n = sorted(live), len(live)
    if not n:
        return
    print(
        f"\nreal engine: A streamed {len(mine.at)} events in {mine.at[-1] - mine.at[0]:.1f} s; re-stream delay "
        f"over {n} live events, ms: median {lag[n // 2]:.0f}, p95 {lag[int(n * 0.95)]:.0f}, max {lag[-1]:.0f}; "
        f"by decile of the stream: {[round(live[i * n // 10]) for i in range(10)]}"
    )

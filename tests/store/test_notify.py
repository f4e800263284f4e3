"""Postgres LISTEN/NOTIFY between replicas (store/notify.py): a cancel request wakes the owner's heartbeat and
stored events wake re-streams, at once; listening resumes after a database restart; two live replicas whose
heartbeat and re-stream poll are far longer than the test still cancel and re-stream at once."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

import openai
import pytest

from tests.runs.test_restream_replicas import Frames
from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.postgres import PostgresServer
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.store.notify import (
    LocalNotices,
    PostgresNotices,
    cancel_key,
    events_key,
    wait_woken,
)
from vllm_responses.store.postgres import PostgresStore

MODEL = "fake-model"
SLOW = 30.0  # heartbeat and re-stream poll of the live test: far longer than its waits


@pytest.fixture
async def stores(pg_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database, as two replicas hold them."""
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    await a.open()
    await b.open()
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_a_cancel_request_wakes_the_owner_only(stores: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = stores
    assert a.notices.listening and b.notices.listening
    await a.take_lease("resp_1", "replica-a", time.time() + 60)
    with (
        a.notices.waiter(cancel_key("replica-a")) as mine,
        a.notices.waiter(cancel_key("replica-c")) as other,
    ):
        assert await b.request_cancel("resp_1")
        assert await wait_woken(mine, 10), "the owner was not notified"
        assert not other.is_set()
        assert not await b.request_cancel("resp_unknown")  # no lease: no notice
        assert not await wait_woken(mine, 0.5)
    assert await a.renew_leases("replica-a", time.time() + 60) == ["resp_1"]  # the flag is what counts


async def test_stored_events_wake_the_followers(stores: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = stores
    with b.notices.waiter(events_key("resp_2")) as woken, b.notices.waiter(events_key("resp_3")) as other:
        await a.append_events("resp_2", [(0, json.dumps({"type": "response.created"}))])
        assert await wait_woken(woken, 10)
        assert not other.is_set()
    assert await b.events_after("resp_2", -1) == [(0, '{"type": "response.created"}')]


async def test_listening_again_after_a_database_restart(
    stores: tuple[PostgresStore, PostgresStore], postgres_server: PostgresServer
) -> None:
    a, b = stores
    assert isinstance(a.notices, PostgresNotices)
    a.notices.retry_s = 0.1
    with a.notices.waiter(events_key("resp_4")) as woken:
        await asyncio.to_thread(postgres_server.halt)
        try:
            deadline = time.monotonic() + 10
            while a.notices.listening and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not a.notices.listening, "the lost LISTEN connection was not noticed"
        finally:
            await asyncio.to_thread(postgres_server.resume)
        assert await wait_woken(woken, 30), "waiters are woken once listening again (notices may be lost)"
        assert a.notices.listening
        await b.append_events("resp_4", [(0, json.dumps({"type": "response.created"}))])
        assert await wait_woken(woken, 10), "no notice after the restart"


async def test_local_notices_wake_only_their_key() -> None:
    notices = LocalNotices()
    assert not notices.listening
    with notices.waiter("k") as one, notices.waiter("k") as two, notices.waiter("j") as other:
        notices.wake("k")
        assert one.is_set() and two.is_set() and not other.is_set()
        notices.wake_all()
        assert other.is_set()
    notices.wake("k")  # no waiter left: nothing to do
    assert not await wait_woken(asyncio.Event(), 0.01)


@pytest.fixture
def replicas(pg_url: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    cfg = Config(replica_heartbeat=SLOW, replica_lease=2 * SLOW, restream_poll_interval=SLOW)
    a = LiveServer(cfg, FakeEngine(), FakeInterpreter(), db=pg_url).start()
    b = LiveServer(cfg, FakeEngine(), FakeInterpreter(), db=pg_url).start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def test_cancel_and_restream_across_replicas_do_not_wait_for_a_poll(
    replicas: tuple[LiveServer, LiveServer],
) -> None:
    """With a 30 s heartbeat and a 30 s re-stream poll, a cancel through B and B's re-stream of A's response
    each take a fraction of that: the notices, not the polls, carried them."""
    a, b = replicas
    client_a, client_b = (
        openai.OpenAI(base_url=s.base_url + "/v1", api_key="-", max_retries=0, timeout=60) for s in (a, b)
    )
    a.engine.reset(say("word " * 120), delay=0.02)  # a few seconds of output
    first = client_a.responses.create(model=MODEL, input="talk", background=True)
    follower = Frames("GET", f"{b.base_url}/v1/responses/{first.id}", params={"stream": "true"})
    follower.join()
    assert json.loads(follower.data[-1])["type"] == "response.completed"
    assert client_a.responses.retrieve(first.id).status == "completed"
    # B's last event came well before one poll interval after A's run ended (stored within ~0.1 s of it)
    assert follower.at[-1] - follower.at[0] < SLOW / 3, "B's re-stream waited for its poll"

    a.engine.reset(say("slow " * 1000), delay=0.05)  # ~50 s unless cancelled
    second = client_a.responses.create(model=MODEL, input="slow", background=True)
    start = time.monotonic()
    assert client_b.responses.cancel(second.id).status == "cancelled"
    took = time.monotonic() - start
    print(f"\ncancel through B with a {SLOW:g} s heartbeat: {took:.2f} s")
    assert took < SLOW / 3, "the cancel waited for A's heartbeat"

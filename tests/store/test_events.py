"""Stored stream events, each backend in turn (memory, SQLite, a real Postgres): order, idempotence, deleted and
pruned with their response; and `EventLog`, which writes them in batches, the last ones on close."""

from __future__ import annotations

import asyncio
import time

from tests.store.test_responses import opened, record
from vllm_responses.protocol.events import Event
from vllm_responses.runs.event_log import EventLog
from vllm_responses.store.base import StoredEvent
from vllm_responses.store.memory import MemoryStore


async def test_events_round_trip_delete_and_prune(store_db: str) -> None:
    store = await opened(store_db, max_age_s=60)
    await store.save(record(1))
    await store.append_events("resp_1", [(0, '{"n":0}'), (1, '{"n":1}')])
    await store.append_events("resp_1", [(1, '{"n":"again"}'), (2, '{"n":2,"s":"\\u0000 \u00e9"}')])
    assert await store.events_after("resp_1", -1) == [
        (0, '{"n":0}'),
        (1, '{"n":1}'),
        (2, '{"n":2,"s":"\\u0000 \u00e9"}'),
    ]
    assert await store.events_after("resp_1", 0, limit=1) == [(1, '{"n":1}')]
    assert await store.events_after("resp_1", 2) == []
    assert await store.events_after("resp_unknown", -1) == []
    assert await store.delete("resp_1") is True
    assert await store.events_after("resp_1", -1) == []  # gone with their response
    await store.aclose()


async def test_events_are_pruned_with_their_response(store_db: str) -> None:
    store = MemoryStore(max_rows=1) if store_db == ":memory:" else await opened(store_db, max_age_s=60)
    await store.save(record(2, created_at=time.time() - 3600))  # past the age bound
    await store.append_events("resp_2", [(0, "{}")])
    await store.save(record(3))  # (memory: past the row bound, resp_2 goes now)
    await store.append_events("resp_3", [(0, "{}")])
    await store.prune()
    assert await store.events_after("resp_2", -1) == []
    assert await store.events_after("resp_3", -1) == [(0, "{}")]
    await store.aclose()


class CountingStore(MemoryStore):
    """A memory store counting `append_events` calls; the first `fail` of them raise."""

    def __init__(self, fail: int = 0) -> None:
        super().__init__()
        self.writes: list[int] = []
        self.fail = fail

    async def append_events(self, response_id: str, events: list[StoredEvent]) -> None:
        if self.fail:
            self.fail -= 1
            raise OSError("the database went away")
        self.writes.append(len(events))
        await asyncio.sleep(0.01)  # a write takes a while: events pile up meanwhile
        await super().append_events(response_id, events)


def _event(n: int) -> Event:
    return {"type": "response.output_text.delta", "sequence_number": n, "delta": "x"}  # type: ignore[typeddict-item]


async def test_event_log_writes_in_batches_and_everything_on_close() -> None:
    store = CountingStore()
    log = EventLog(store, "resp_1", interval_s=0.05, batch=64)
    for n in range(500):
        log.add(_event(n))
        if n % 50 == 0:
            await asyncio.sleep(0)  # let the writer run now and then
    await log.aclose()
    kept = await store.events_after("resp_1", -1, limit=10_000)
    assert [seq for seq, _ in kept] == list(range(500))
    assert kept[7][1] == '{"type":"response.output_text.delta","sequence_number":7,"delta":"x"}'
    assert sum(store.writes) == 500 and len(store.writes) <= 500 // 50, store.writes  # batches, not events


async def test_event_log_keeps_events_of_a_failed_write_for_the_next() -> None:
    store = CountingStore(fail=1)
    log = EventLog(store, "resp_1", interval_s=0.01)
    log.add(_event(0))
    await asyncio.sleep(0.05)  # the first write fails (logged)
    log.add(_event(1))
    await log.aclose()
    assert [seq for seq, _ in await store.events_after("resp_1", -1)] == [0, 1]

"""`Admission`: slots up to the limit, a FIFO wait queue, 429s past both, release exactly once, cancelled waiters
leave; `reserve` decides a place at once (a `Ticket`, admitted or queued) and each admission's wait is observed;
`until_disconnect` gives up on the work when the ASGI channel says the client left."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from vllm_responses.api.responses import until_disconnect
from vllm_responses.protocol.errors import Busy, Unavailable
from vllm_responses.service.admission import Admission, Ticket, default_max_queued


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_slots_then_fifo_queue_then_429() -> None:
    adm = Admission(2, 2)
    a, b = await adm.acquire(), await adm.acquire()
    assert (adm.running, adm.queued, adm.full) == (2, 0, False)
    order: list[str] = []

    async def wait(name: str) -> Ticket:
        slot = await adm.acquire()
        order.append(name)
        return slot

    c = asyncio.ensure_future(wait("c"))
    await _settle()
    d = asyncio.ensure_future(wait("d"))
    await _settle()
    assert (adm.running, adm.queued, adm.full) == (2, 2, True)
    with pytest.raises(Busy) as refused:
        await adm.acquire()
    err = refused.value
    assert err.status == 429 and err.code == "rate_limit_exceeded" and err.type == "rate_limit_error"
    assert err.headers is not None and int(err.headers["Retry-After"]) >= 1
    with pytest.raises(Busy):
        adm.refuse_if_full()
    assert adm.rejected_total == 2
    b.release()  # the first waiter gets the slot
    await _settle()
    assert order == ["c"] and (adm.running, adm.queued) == (2, 1)
    a.release()
    await _settle()
    assert order == ["c", "d"] and (adm.running, adm.queued) == (2, 0)
    (await c).release()
    (await d).release()
    assert (adm.running, adm.queued, adm.rejected_total) == (0, 0, 2)


async def test_a_slot_is_released_once_whoever_releases_it() -> None:
    adm = Admission(1, 1)
    slot = await adm.acquire()
    waiter = asyncio.ensure_future(adm.acquire())
    await _settle()
    slot.release()
    slot.release()  # a second release (e.g. the run's callback after an error path) changes nothing
    second = await waiter
    assert adm.running == 1 and slot.released
    second.release()
    second.release()
    assert adm.running == 0
    third = await adm.acquire()  # nothing was lost or duplicated
    assert adm.running == 1 and not third.released


async def test_a_cancelled_waiter_leaves_the_queue_at_once() -> None:
    adm = Admission(1, 2)
    held = await adm.acquire()
    first = asyncio.ensure_future(adm.acquire())
    second = asyncio.ensure_future(adm.acquire())
    await _settle()
    assert adm.queued == 2
    first.cancel()
    await _settle()
    assert adm.queued == 1 and first.cancelled()
    held.release()  # goes to the waiter still there
    slot = await second
    assert (adm.running, adm.queued) == (1, 0)
    slot.release()
    assert adm.running == 0


async def test_a_waiter_granted_as_it_is_cancelled_passes_the_slot_on() -> None:
    adm = Admission(1, 2)
    held = await adm.acquire()
    first = asyncio.ensure_future(adm.acquire())
    second = asyncio.ensure_future(adm.acquire())
    await _settle()
    held.release()  # grants `first`...
    first.cancel()  # ...which is cancelled before it resumed: the slot goes on to `second`
    await _settle()
    assert first.cancelled()
    slot = await second
    assert (adm.running, adm.queued) == (1, 0)
    slot.release()
    assert adm.running == 0


async def test_close_refuses_the_queue_and_later_requests_but_keeps_running_slots() -> None:
    adm = Admission(1, 2)
    held = await adm.acquire()
    waiting = [asyncio.ensure_future(adm.acquire()) for _ in range(2)]
    await _settle()
    gone = Unavailable("The server is shutting down.", code="shutting_down")
    adm.close(gone)
    await _settle()
    for w in waiting:  # the queued requests get the 503, not a slot
        assert w.done() and w.exception() is gone
    assert (adm.running, adm.queued) == (1, 0)
    with pytest.raises(Unavailable):
        await adm.acquire()
    with pytest.raises(Unavailable):
        adm.refuse_if_full()
    held.release()  # the running response still ends normally and gives its slot back
    assert adm.running == 0


async def test_no_queue_refuses_at_once_and_retry_after_follows_hold_times() -> None:
    adm = Admission(2, 0)
    assert adm.retry_after() == 1  # nothing measured yet
    slots = [await adm.acquire(), await adm.acquire()]
    with pytest.raises(Busy):
        await adm.acquire()
    adm._mean_hold_s = 30.0  # responses held their slot 30 s on average; two slots: one ends every ~15 s
    assert adm.retry_after() == 15
    adm._mean_hold_s = 1e6
    assert adm.retry_after() == 60
    for s in slots:
        s.release()
    assert default_max_queued(8) == 16
    with pytest.raises(ValueError):
        Admission(0, 1)


async def test_until_disconnect() -> None:
    messages: asyncio.Queue[dict[str, str]] = asyncio.Queue()

    async def receive() -> dict[str, str]:
        return await messages.get()

    assert await until_disconnect(receive, asyncio.sleep(0, "done")) == "done"  # type: ignore[arg-type]
    cancelled = asyncio.Event()

    async def forever() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    pending = asyncio.ensure_future(until_disconnect(receive, forever()))  # type: ignore[arg-type]
    await _settle()
    messages.put_nowait({"type": "http.disconnect"})
    assert await pending is None and cancelled.is_set()

    async def refused() -> str:
        raise Busy("full")

    with pytest.raises(Busy):  # the work's own error comes through
        await until_disconnect(receive, refused())  # type: ignore[arg-type]


async def test_reserve_decides_the_place_at_once() -> None:
    adm = Admission(1, 1)
    first = adm.reserve()  # a free slot: admitted, no await
    assert first.admitted and (adm.running, adm.queued) == (1, 0)
    second = adm.reserve()  # queued behind it
    assert not second.admitted and (adm.running, adm.queued) == (1, 1)
    with pytest.raises(Busy):
        adm.reserve()  # the queue is full too: the 429 now
    waiting = asyncio.ensure_future(second.wait())
    await _settle()
    assert not waiting.done()
    first.release()
    await waiting
    assert second.admitted and (adm.running, adm.queued) == (1, 0)
    assert second.admitted_at is not None and second.admitted_at >= second.accepted_at
    second.release()
    assert (adm.running, adm.queued) == (0, 0)


async def test_a_released_queued_ticket_leaves_the_queue_even_mid_wait() -> None:
    adm = Admission(1, 2)
    held, leaving, staying = adm.reserve(), adm.reserve(), adm.reserve()
    waiter = asyncio.ensure_future(leaving.wait())
    await _settle()
    waiter.cancel()  # a cancelled wait keeps the place...
    await _settle()
    assert adm.queued == 2
    leaving.release()  # ...until it is released
    leaving.release()
    assert adm.queued == 1
    held.release()  # the slot goes to the ticket still queued
    assert staying.admitted and (adm.running, adm.queued) == (1, 0)
    await staying.wait()  # admitted already: returns at once
    staying.release()
    assert adm.running == 0


async def test_close_refuses_queued_tickets_and_release_after_it_is_quiet() -> None:
    adm = Admission(1, 1)
    held, queued = adm.reserve(), adm.reserve()
    gone = Unavailable("The server is shutting down.", code="shutting_down")
    adm.close(gone)
    with pytest.raises(Unavailable):
        await queued.wait()
    queued.release()  # never admitted: nothing to give back
    assert (adm.running, adm.queued) == (1, 0)
    unwaited = Admission(1, 1)
    unwaited.reserve()
    never_waited = unwaited.reserve()
    unwaited.close(gone)
    never_waited.release()  # its refusal is retrieved: no "exception never retrieved" at collection
    held.release()
    assert adm.running == 0


async def test_each_admission_observes_its_wait() -> None:
    count = REGISTRY.get_sample_value("vllm_responses_admission_wait_seconds_count") or 0.0
    adm = Admission(1, 1)
    first, second = adm.reserve(), adm.reserve()
    await asyncio.sleep(0.05)
    first.release()
    assert REGISTRY.get_sample_value("vllm_responses_admission_wait_seconds_count") == count + 2
    assert second.admitted_at is not None and second.admitted_at - second.accepted_at >= 0.05
    second.release()

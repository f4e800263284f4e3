"""`Run.follow_batches`: events ready at once come as one batch (one SSE write), in order, until the end."""

from __future__ import annotations

import asyncio

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.runs.run import Run


def _run() -> Run:
    return Run(ResponseBuilder({"model": "m"}, include_outputs=False), background=False)


async def test_backlog_and_what_queued_meanwhile_come_as_batches() -> None:
    run = _run()
    for i in range(3):
        run.publish({"type": "e", "n": i})
    batches = run.follow_batches()
    assert [e["n"] for e in await anext(batches)] == [0, 1, 2]
    waiting = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0)
    run.publish({"type": "e", "n": 3})  # the reader is waiting: it gets this one alone...
    assert [e["n"] for e in await waiting] == [3]
    run.publish({"type": "e", "n": 4})  # ...and these two, published while it was away, together
    run.publish({"type": "e", "n": 5})
    run.close()
    assert [e["n"] for e in await anext(batches)] == [4, 5]
    assert [b async for b in batches] == []


async def test_a_late_follower_starts_after_the_sequence_number_it_names() -> None:
    run = _run()
    for i in range(4):
        run.publish({"type": "e", "n": i, "sequence_number": i})
    run.close()
    assert [[e["n"] for e in b] async for b in run.follow_batches(starting_after=1)] == [[2, 3]]
    assert [len(b) async for b in run.follow_batches()] == [4]


async def test_an_idle_follower_gets_an_empty_batch_per_silent_stretch_and_loses_nothing() -> None:
    run = _run()
    batches = run.follow_batches(idle_s=0.05)
    assert await anext(batches) == []  # nothing for 0.05 s: a keep-alive
    assert await anext(batches) == []
    run.publish({"type": "e", "n": 0})
    assert [e["n"] for e in await anext(batches)] == [0]
    for i in range(1, 4):  # published while the reader waits with a timeout: none is lost
        waiting = asyncio.ensure_future(anext(batches))
        await asyncio.sleep(0.01 * i)
        run.publish({"type": "e", "n": i})
        assert [e["n"] for e in await waiting] == [i]
    run.close()
    assert [b async for b in batches] == []

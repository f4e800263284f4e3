"""`ContainerService` over the fake interpreter, without HTTP: lookups, expiry and the domain errors."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable

import pytest

from interpreter_service import DATA_DIR, ContainerNotFound, InterpreterError, PoolExhausted
from tests.support.fakes import FakeInterpreter
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.tools.containers import ContainerService


def _idle_for(interp: FakeInterpreter, container_id: str, seconds: float) -> None:
    """Make the fake's container look last used `seconds` ago."""
    info = interp.infos[container_id]
    interp.infos[container_id] = dataclasses.replace(info, last_active_at=time.time() - seconds)


async def test_create_get_list_delete() -> None:
    interp = FakeInterpreter()
    svc = ContainerService(interp)
    a = await svc.create(name="a", memory_limit="4g")
    b = await svc.create()
    assert (a.name, a.memory_limit, b.name) == ("a", "4g", None)
    assert await svc.get(a.id) == a
    assert [i.id for i in await svc.list_all()] == [a.id, b.id]
    await svc.delete(a.id)
    assert a.id not in interp.infos
    with pytest.raises(ContainerNotFound, match=f"Container '{a.id}' not found or expired."):
        await svc.get(a.id)
    with pytest.raises(ContainerNotFound, match="not found or expired"):
        await svc.delete(a.id)
    assert [i.id for i in await svc.list_all()] == [b.id]


async def test_unknown_container_is_container_not_found() -> None:
    svc = ContainerService(FakeInterpreter())
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: svc.get("cntr_nope"),
        lambda: svc.delete("cntr_nope"),
        lambda: svc.files("cntr_nope"),
        lambda: svc.file("cntr_nope", "cfile_x"),
        lambda: svc.upload("cntr_nope", "a.txt", b"x"),
    ]
    for call in calls:
        with pytest.raises(ContainerNotFound, match="Container 'cntr_nope' not found or expired."):
            await call()


async def test_a_short_expires_after_deletes_the_container_when_next_looked_up() -> None:
    interp = FakeInterpreter()
    svc = ContainerService(interp)
    brief = await svc.create(expires_after_s=60.0)
    plain = await svc.create()
    assert svc.expires_after_s(brief) == 60.0 and svc.expires_after_s(plain) == plain.expires_after_s
    _idle_for(interp, brief.id, 59)
    _idle_for(interp, plain.id, 61)
    assert {i.id for i in await svc.list_all()} == {brief.id, plain.id}  # the pool's own expiry is longer
    _idle_for(interp, brief.id, 61)
    with pytest.raises(ContainerNotFound):
        await svc.get(brief.id)
    assert brief.id not in interp.infos  # deleted from the pool, its slot freed


async def test_expired_containers_leave_the_list_and_the_pool() -> None:
    interp = FakeInterpreter()
    svc = ContainerService(interp)
    brief = await svc.create(expires_after_s=60.0)
    _idle_for(interp, brief.id, 120)
    assert await svc.list_all() == []
    assert brief.id not in interp.infos


async def test_a_longer_expires_after_is_capped_at_the_pools() -> None:
    interp = FakeInterpreter()
    svc = ContainerService(interp)
    info = await svc.create(expires_after_s=1e9)
    assert svc.expires_after_s(info) == info.expires_after_s
    _idle_for(interp, info.id, info.expires_after_s + 1)
    with pytest.raises(ContainerNotFound):
        await svc.get(info.id)


async def test_a_full_pool_raises_pool_exhausted() -> None:
    svc = ContainerService(FakeInterpreter(max_containers=1))
    await svc.create()
    with pytest.raises(PoolExhausted):
        await svc.create(name="two")


async def test_without_an_interpreter_every_call_is_refused() -> None:
    svc = ContainerService(None)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: svc.get("cntr_x"),
        lambda: svc.create(),
        lambda: svc.list_all(),
        lambda: svc.files("cntr_x"),
    ]
    for call in calls:
        with pytest.raises(InvalidRequest, match="disabled"):
            await call()


async def test_files_upload_find_read_delete() -> None:
    interp = FakeInterpreter()
    svc = ContainerService(interp)
    cid = (await svc.create()).id
    up = await svc.upload(cid, "in.csv", b"a,b\n")
    assert (up.path, up.source, up.bytes, up.container_id) == (f"{DATA_DIR}/in.csv", "user", 4, cid)
    assert await svc.files(cid) == [up]
    assert await svc.file(cid, up.id) == up
    assert await svc.file(cid, "cfile_nope") is None
    assert await svc.content(up) == b"a,b\n"
    await svc.delete_file(up)
    assert await svc.files(cid) == [] and await svc.file(cid, up.id) is None
    with pytest.raises(InterpreterError):  # the sandbox's own failure passes through
        await svc.content(up)


async def test_a_file_call_on_a_container_gone_meanwhile_names_it() -> None:
    interp = FakeInterpreter()
    svc = ContainerService(interp)
    cid = (await svc.create()).id
    up = await svc.upload(cid, "in.csv", b"x")
    await interp.delete_container(cid)
    with pytest.raises(ContainerNotFound, match=f"Container '{cid}' not found or expired."):
        await svc.content(up)
    with pytest.raises(ContainerNotFound, match=f"Container '{cid}' not found or expired."):
        await svc.delete_file(up)

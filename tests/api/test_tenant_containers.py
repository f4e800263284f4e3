"""Container ownership kept with the container, in the sandbox (`ContainerInfo.owner`): every gateway of one
sandbox, and a gateway started again, sees whose a container is; the label travels through the sandbox
service's HTTP API."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from interpreter_service.service.app import create_app
from interpreter_service.service.client import HTTPInterpreter
from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from vllm_responses.config import Config

MODEL = "fake-model"
KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"


@pytest.fixture
def keys(tmp_path: Path) -> str:
    entries = [
        {"key": KEY_A, "project": "proj_a"},
        {"sha256": hashlib.sha256(KEY_B.encode()).hexdigest(), "project": "proj_b"},
    ]
    return write_keys_file(tmp_path / "keys.json", entries)


@pytest.fixture
def shared() -> FakeInterpreter:
    return FakeInterpreter(max_containers=20)


@pytest.fixture
def gateways(keys: str, shared: FakeInterpreter) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two gateways with the same keys file on one sandbox (as replicas on a shared sandbox service)."""
    one = LiveServer(Config(api_keys_file=keys), FakeEngine(), shared).start()
    two = LiveServer(Config(api_keys_file=keys), FakeEngine(), shared).start()
    yield one, two
    one.stop()
    two.stop()


def _sdk(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_every_gateway_of_a_sandbox_knows_whose_a_container_is(
    gateways: tuple[LiveServer, LiveServer], shared: FakeInterpreter
) -> None:
    one, two = gateways
    made = _sdk(one, KEY_A).containers.create(name="a's")
    assert shared.infos[made.id].owner == "proj_a"  # kept with the container, not by the gateway
    a2, b2 = _sdk(two, KEY_A), _sdk(two, KEY_B)
    assert a2.containers.retrieve(made.id).name == "a's"  # its project, through the other gateway
    assert made.id in [c.id for c in a2.containers.list().data]
    with pytest.raises(openai.NotFoundError):
        b2.containers.retrieve(made.id)
    assert made.id not in [c.id for c in b2.containers.list().data]
    with pytest.raises(openai.NotFoundError):
        b2.containers.delete(made.id)
    two.engine.reset(code_call("x = 1"), say("Set."))
    tools = [{"type": "code_interpreter", "container": made.id}]
    with pytest.raises(openai.NotFoundError):
        b2.responses.create(model=MODEL, input="x", tools=tools)  # type: ignore[arg-type]
    assert shared.executions == [] and made.id in shared.infos  # never run in, never deleted
    done = a2.responses.create(model=MODEL, input="x", tools=tools)  # type: ignore[arg-type]
    assert done.status == "completed" and shared.executions[-1][0] == made.id
    a2.containers.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        _sdk(one, KEY_A).containers.retrieve(made.id)


def test_a_gateway_started_again_keeps_the_owners(keys: str, shared: FakeInterpreter) -> None:
    first = LiveServer(Config(api_keys_file=keys), FakeEngine(), shared).start()
    try:
        made = _sdk(first, KEY_B).containers.create(name="b's")
    finally:
        first.stop()
    again = LiveServer(Config(api_keys_file=keys), FakeEngine(), shared).start()
    try:
        assert _sdk(again, KEY_B).containers.retrieve(made.id).name == "b's"
        with pytest.raises(openai.NotFoundError):
            _sdk(again, KEY_A).containers.retrieve(made.id)
    finally:
        again.stop()


async def test_the_owner_travels_through_the_sandbox_services_api() -> None:
    app = create_app(FakeInterpreter(), manage_lifecycle=False)
    transport = httpx.ASGITransport(app=app)
    async with HTTPInterpreter("http://sandbox", transport=transport) as client:
        info = await client.create_container(name="n", owner="proj_a")
        assert info.owner == "proj_a"
        assert (await client.get_container(info.id)).owner == "proj_a"
        assert [c.owner for c in await client.list_containers()] == ["proj_a"]
        assert (await client.create_container()).owner is None
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as raw:
            r = await raw.post("/v1/containers", json={"owner": "x" * 201})
        assert r.status_code == 400 and r.json()["error"]["type"] == "bad_request"

"""A Postgres store that loses its connections: a server restart costs no request anything (the call is
retried once on fresh connections), a server down is a 503 `store_unavailable`, never a 500."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.postgres import PostgresServer
from tests.support.serving import LiveServer
from vllm_responses.config import Config


@pytest.fixture
def server(pg_url: str, postgres_server: PostgresServer) -> Iterator[LiveServer]:
    live = LiveServer(Config(), FakeEngine(), FakeInterpreter(), db=pg_url).start()
    yield live
    live.stop()


def test_a_postgres_restart_then_outage(server: LiveServer, postgres_server: PostgresServer) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0)
    r = client.responses.create(model="fake-model", input="keep me")
    assert client.responses.retrieve(r.id).status == "completed"  # the pool holds a live connection now

    postgres_server.halt()
    try:
        got = httpx.get(f"{server.base_url}/v1/responses/{r.id}", timeout=30)
        assert got.status_code == 503, got.text
        error = got.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "store_unavailable"), error
        with pytest.raises(openai.InternalServerError) as raised:  # the SDK sees the same 503
            client.responses.input_items.list(r.id)
        assert raised.value.status_code == 503
    finally:
        postgres_server.resume()
    # back: the pool's dead connections are replaced (the first call meets one and is retried)
    assert client.responses.retrieve(r.id).status == "completed"

    postgres_server.halt()  # a restart between two calls: no error at all
    postgres_server.resume()
    assert client.responses.retrieve(r.id).status == "completed"
    assert [i.type for i in client.responses.input_items.list(r.id)] == ["message"]
    assert client.responses.create(model="fake-model", previous_response_id=r.id, input="more").status == (
        "completed"
    )

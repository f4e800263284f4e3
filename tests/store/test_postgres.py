"""The server over a real Postgres (`--db postgresql://...`), through the openai SDK: responses (create,
retrieve, input items, previous_response_id, delete) and a conversation, kept across a server restart."""

from __future__ import annotations

import openai
import pytest

from tests.support.fakes import FakeEngine, say
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config
from vllm_responses.store.postgres import PostgresStore

MODEL = "fake-model"


def _server(db: str, engine: FakeEngine) -> LiveServer:
    return LiveServer(Config(db=db), engine, None, db=db).start()


def _client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0, timeout=30)


def test_responses_and_a_conversation_live_in_postgres_across_a_restart(pg_url: str) -> None:
    engine = FakeEngine()
    server = _server(pg_url, engine)
    try:
        assert isinstance(server.store, PostgresStore)
        client = _client(server)
        engine.reset(say("first answer"))
        first = client.responses.create(model=MODEL, input="first question")
        validate_response(first.model_dump(mode="json"))
        engine.reset(say("second answer"))
        second = client.responses.create(model=MODEL, input="second question", previous_response_id=first.id)
        assert second.output_text == "second answer"
        seen = [str(t) for t in engine.requests[-1].turns]
        assert any("first answer" in t for t in seen), seen  # continued from the history Postgres kept
        doomed = client.responses.create(model=MODEL, input="to delete")
        assert client.responses.delete(doomed.id) is None
        conv = client.conversations.create(
            items=[{"type": "message", "role": "user", "content": "hello"}], metadata={"k": "v"}
        )
        engine.reset(say("in the conversation"))
        client.responses.create(model=MODEL, input="and then?", conversation=conv.id)
        conv_items = [i.id for i in client.conversations.items.list(conv.id, order="asc")]
        assert len(conv_items) == 3  # its item, then the response's input and output
    finally:
        server.stop()

    server = _server(pg_url, FakeEngine())  # a new process's worth: a new pool, the same database
    try:
        client = _client(server)
        again = client.responses.retrieve(second.id)
        assert again.output_text == "second answer" and again.previous_response_id == first.id
        assert [i.type for i in client.responses.input_items.list(first.id)] == ["message"]
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(doomed.id)
        assert client.conversations.retrieve(conv.id).metadata == {"k": "v"}
        assert [i.id for i in client.conversations.items.list(conv.id, order="asc")] == conv_items
    finally:
        server.stop()

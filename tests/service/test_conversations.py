"""Conversations through the real `openai` SDK over the fake engine: every endpoint, pagination, the 4xx, and the
rules of `conversation` on create (its items go first; a completed or incomplete response appends its input
and output; a failed or cancelled one appends nothing)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItemList

from tests.api.test_responses import raw_stream, wait_until
from tests.support.fakes import FakeEngine, code_call, say
from tests.support.serving import LiveServer
from tests.support.wire import validate_as, validate_response
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import Message, ToolCall, ToolResult

MODEL = "fake-model"
CI: Any = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def _raw(client: openai.OpenAI, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, str(client.base_url).rstrip("/") + path, timeout=10, **kw)


def _items(client: openai.OpenAI, cid: str, **query: Any) -> list[dict[str, Any]]:
    """Every item, oldest first, as sent (validated as the SDK's `ConversationItemList`)."""
    body = _raw(
        client, "GET", f"/conversations/{cid}/items", params={"order": "asc", "limit": 100, **query}
    ).json()
    validate_as(ConversationItemList, body)
    return body["data"]  # type: ignore[no-any-return]


def _error(exc: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    body = exc.value.body
    assert isinstance(body, dict)
    return body


def test_create_retrieve_update_delete(client: openai.OpenAI) -> None:
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "hello"}], metadata={"topic": "demo"}
    )
    raw = _raw(client, "GET", f"/conversations/{conv.id}").json()
    validate_as(Conversation, raw)
    assert (
        conv.id.startswith("conv_") and conv.object == "conversation" and conv.metadata == {"topic": "demo"}
    )
    assert client.conversations.retrieve(conv.id) == conv
    updated = client.conversations.update(conv.id, metadata={"topic": "other", "n": "2"})
    assert updated.metadata == {"topic": "other", "n": "2"} and updated.created_at == conv.created_at
    assert client.conversations.retrieve(conv.id).metadata == {"topic": "other", "n": "2"}
    assert client.conversations.update(conv.id, metadata=None).metadata == {}

    deleted = _raw(client, "DELETE", f"/conversations/{conv.id}").json()
    validate_as(ConversationDeletedResource, deleted)
    assert deleted == {"id": conv.id, "object": "conversation.deleted", "deleted": True}
    for call in (
        lambda: client.conversations.retrieve(conv.id),
        lambda: client.conversations.delete(conv.id),
        lambda: client.conversations.update(conv.id, metadata={}),
        lambda: client.conversations.items.list(conv.id),
        lambda: client.conversations.items.create(conv.id, items=[{"role": "user", "content": "x"}]),
    ):
        with pytest.raises(openai.NotFoundError) as exc:
            call()
        assert _error(exc)["param"] == "conversation_id"


def test_items_create_list_paginate_retrieve_delete(client: openai.OpenAI) -> None:
    conv = client.conversations.create()
    assert _items(client, conv.id) == []
    empty = _raw(client, "GET", f"/conversations/{conv.id}/items").json()
    assert empty == {"object": "list", "data": [], "first_id": "", "last_id": "", "has_more": False}
    sent: Any = [
        {"role": "user", "content": "What is 6*7?"},
        {"type": "function_call", "call_id": "c1", "name": "calc", "arguments": '{"x": "6*7"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42."}]},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Thanks."}],
            "id": "msg_mine",
        },
    ]
    added = client.conversations.items.create(conv.id, items=sent)
    assert [i.type for i in added.data] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert added.data[-1].id == "msg_mine" and added.first_id == added.data[0].id and not added.has_more
    every = _items(client, conv.id)
    assert [i["id"] for i in every] == [i.id for i in added.data]
    assert every[3]["content"] == [{"type": "output_text", "text": "42.", "annotations": []}]
    assert all(i["status"] == "completed" for i in every)

    ids = [i["id"] for i in every]
    assert [i.id for i in client.conversations.items.list(conv.id, limit=2)] == ids[
        ::-1
    ]  # desc, cursors followed
    assert [i.id for i in client.conversations.items.list(conv.id, limit=2, order="asc")] == ids
    page = _raw(
        client, "GET", f"/conversations/{conv.id}/items", params={"limit": 2, "after": ids[1], "order": "asc"}
    )
    body = page.json()
    assert [i["id"] for i in body["data"]] == ids[2:4] and body["has_more"] is True
    assert (body["first_id"], body["last_id"]) == (ids[2], ids[3])
    last = _raw(client, "GET", f"/conversations/{conv.id}/items", params={"limit": 2, "after": ids[2]}).json()
    assert [i["id"] for i in last["data"]] == [ids[1], ids[0]] and last["has_more"] is False

    one = client.conversations.items.retrieve(ids[2], conversation_id=conv.id)
    assert one.type == "function_call_output" and one.id == ids[2]
    after_delete = client.conversations.items.delete(ids[2], conversation_id=conv.id)
    assert isinstance(after_delete, Conversation) and after_delete.id == conv.id
    assert [i["id"] for i in _items(client, conv.id)] == ids[:2] + ids[3:]
    with pytest.raises(openai.NotFoundError) as exc:
        client.conversations.items.retrieve(ids[2], conversation_id=conv.id)
    assert _error(exc)["param"] == "item_id"
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete(ids[2], conversation_id=conv.id)

    again = client.conversations.items.create(
        conv.id, items=[{"role": "user", "content": "x", "id": "msg_mine"}]
    )
    assert again.data[0].id != "msg_mine", "an id the conversation holds is given a fresh one"


@pytest.mark.parametrize(
    ("method", "path", "kw", "param"),
    [
        ("POST", "", {"json": {"items": [{"type": "image_generation_call", "id": "ig_1"}]}}, "items[0].type"),
        ("POST", "", {"json": {"items": [{"role": "wizard", "content": "x"}]}}, "items[0].role"),
        ("POST", "", {"json": {"items": [{"role": "user", "content": "x"}] * 21}}, "items"),
        ("POST", "", {"json": {"metadata": {str(i): "v" for i in range(17)}}}, "metadata"),
        ("POST", "", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}, "body"),
        ("POST", "/{cid}", {"json": {}}, "metadata"),
        ("POST", "/{cid}/items", {"json": {}}, "items"),
        ("POST", "/{cid}/items", {"json": {"items": []}, "params": {"include[]": "nope"}}, "include[0]"),
        ("GET", "/{cid}/items", {"params": {"limit": 0}}, "limit"),
        ("GET", "/{cid}/items", {"params": {"order": "sideways"}}, "order"),
        ("GET", "/{cid}/items", {"params": {"after": "msg_unknown"}}, "after"),
    ],
)
def test_bad_requests_are_400_naming_the_param(
    client: openai.OpenAI, method: str, path: str, kw: dict[str, Any], param: str
) -> None:
    cid = client.conversations.create().id
    r = _raw(client, method, "/conversations" + path.format(cid=cid), **kw)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"


def test_response_with_conversation_prepends_and_appends(client: openai.OpenAI, engine: FakeEngine) -> None:
    conv = client.conversations.create(items=[{"role": "user", "content": "My name is Ada."}])
    first_item = _items(client, conv.id)[0]
    engine.reset(say("Hello Ada."), say("Your name is Ada."))
    r1 = client.responses.create(model=MODEL, input="Greet me.", conversation=conv.id)
    assert r1.status == "completed" and r1.conversation is not None and r1.conversation.id == conv.id
    validate_response(client.responses.retrieve(r1.id).model_dump(mode="json", exclude_unset=True))
    assert engine.requests[0].turns == (Message("user", "My name is Ada."), Message("user", "Greet me."))
    after1 = _items(client, conv.id)
    assert [i["id"] for i in after1][0] == first_item["id"] and len(after1) == 3
    assert after1[1]["content"] == [{"type": "input_text", "text": "Greet me."}]
    assert after1[2] == {**r1.output[0].model_dump(mode="json", exclude_unset=True), "status": "completed"}

    r2 = client.responses.create(model=MODEL, input="What is my name?", conversation={"id": conv.id})
    assert r2.output_text == "Your name is Ada." and r2.conversation is not None
    assert engine.requests[1].turns == (
        Message("user", "My name is Ada."),
        Message("user", "Greet me."),
        Message("assistant", "Hello Ada."),
        Message("user", "What is my name?"),
    )
    assert len(_items(client, conv.id)) == 5
    assert [i.id for i in client.responses.input_items.list(r2.id)] == [_items(client, conv.id)[3]["id"]]
    plain = client.responses.create(model=MODEL, input="hi")
    assert plain.conversation is None and "conversation" not in plain.model_dump(exclude_unset=True)


def test_code_calls_in_a_conversation(client: openai.OpenAI, engine: FakeEngine) -> None:
    conv = client.conversations.create()
    engine.reset(code_call("v = 6 * 7\nprint(v)"), say("It is 42."), code_call("print(v + 1)"), say("43."))
    r1 = client.responses.create(model=MODEL, input="6*7?", tools=CI, conversation=conv.id)
    call = next(i for i in _items(client, conv.id) if i["type"] == "code_interpreter_call")
    assert call["outputs"] is None, "outputs only with include"
    shown = next(
        i
        for i in _items(client, conv.id, **{"include[]": "code_interpreter_call.outputs"})
        if i["id"] == call["id"]
    )
    assert shown["outputs"] == [{"type": "logs", "logs": "42\n"}]
    got = client.conversations.items.retrieve(
        call["id"], conversation_id=conv.id, include=["code_interpreter_call.outputs"]
    )
    assert got.type == "code_interpreter_call" and got.outputs is not None

    # A client adding the response's items itself (openai-agents' session) has no outputs: they come from the store.
    other = client.conversations.create()
    client.conversations.items.create(other.id, items=[r1.output[0].model_dump(exclude_unset=True)])  # type: ignore[list-item]
    readded = _items(client, other.id, **{"include[]": "code_interpreter_call.outputs"})[0]
    assert readded["id"] == call["id"] and readded["outputs"] == [{"type": "logs", "logs": "42\n"}]

    r2 = client.responses.create(model=MODEL, input="Add one.", tools=CI, conversation=conv.id)
    assert r2.output_text == "43."
    turns = engine.requests[2].turns
    assert isinstance(turns[1], ToolCall) and isinstance(turns[2], ToolResult) and turns[2].output == "42\n"
    calls = [i for i in r2.output if i.type == "code_interpreter_call"]
    assert calls[0].container_id == r1.output[0].container_id  # type: ignore[union-attr]
    assert calls[0].outputs is None


def test_failed_response_appends_nothing(
    client: openai.OpenAI, fake_server: LiveServer, engine: FakeEngine
) -> None:
    conv = client.conversations.create(items=[{"role": "user", "content": "before"}])

    def boom(request: object) -> list[Any]:
        raise EngineError("the engine fell over")

    engine.reset(boom)
    events = raw_stream(fake_server, {"model": MODEL, "input": "hi", "conversation": conv.id})
    assert events[-1]["type"] == "response.failed"
    assert events[0]["response"]["conversation"] == {"id": conv.id}
    assert [i["content"][0]["text"] for i in _items(client, conv.id)] == ["before"]


def test_cancelled_response_appends_nothing_and_incomplete_appends(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    conv = client.conversations.create()
    engine.reset(say("a long answer " * 50), delay=0.05)
    bg = client.responses.create(model=MODEL, input="go", conversation=conv.id, background=True)
    wait_until(lambda: client.responses.retrieve(bg.id).status == "in_progress")
    assert client.responses.cancel(bg.id).status == "cancelled"
    assert _items(client, conv.id) == []

    engine.reset(say("a long answer " * 5))
    cut = client.responses.create(model=MODEL, input="go", conversation=conv.id, max_output_tokens=16)
    assert cut.status == "incomplete"
    kept = _items(client, conv.id)
    assert [i["role"] for i in kept] == ["user", "assistant"] and kept[1]["status"] == "incomplete"


def test_conversation_errors_on_create(client: openai.OpenAI, engine: FakeEngine) -> None:
    conv = client.conversations.create()
    first = client.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input="hi", conversation=conv.id, previous_response_id=first.id)
    assert _error(bad)["param"] == "conversation"
    for given in ("conv_unknown", {"id": "conv_unknown"}):
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.create(model=MODEL, input="hi", conversation=given, stream=True)  # type: ignore[arg-type]
        assert _error(missing)["param"] == "conversation"
    with pytest.raises(openai.BadRequestError) as shape:
        client.responses.create(model=MODEL, input="hi", conversation={"name": "x"})  # type: ignore[typeddict-unknown-key]
    assert _error(shape)["param"] == "conversation"
    assert _items(client, conv.id) == []


def test_deleting_a_conversation_mid_response_is_harmless(client: openai.OpenAI, engine: FakeEngine) -> None:
    conv = client.conversations.create()
    engine.reset(say("slow answer " * 10), delay=0.05)
    bg = client.responses.create(model=MODEL, input="go", conversation=conv.id, background=True)
    client.conversations.delete(conv.id)
    wait_until(lambda: client.responses.retrieve(bg.id).status == "completed")
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.list(conv.id)

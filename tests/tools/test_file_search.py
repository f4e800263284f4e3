"""`file_search` over the project's vector stores, on a live server with the scripted engine and the fake embedder,
through the `openai` SDK: the model's call searched, its `file_search_call` item and events as the SDK types them,
`results` only with the include, what the model reads, `file_citation`s where the answer names a result's file
id; the tool checked when the request is made (404 / 400 naming the field); `tool_choice` and `allowed_tools`; a
failed search a failed call the response goes on from; the item given back (with or without its results, through
`previous_response_id`, a conversation); the `/search` route's query bound."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseFileSearchToolCall, ResponseOutputMessage

from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, sdk_refusal, validate_as, validate_response
from vllm_responses.config import Config
from vllm_responses.engine.base import EngineUnavailable
from vllm_responses.engine.embedder import Embedded
from vllm_responses.engine.types import ForcedTool, ToolCall, ToolResult

MODEL = "fake-model"
KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"
OWLS = "# Owls\n\nOwls hunt at night. The barn owl hears mice under snow.\n"
TIDES = "Tides rise and fall twice a day, pulled by the moon and the sun.\n"


class Fixture:
    """The live server, its fake engine and embedder, project A's vector store and its two files."""

    def __init__(self, live: LiveServer, embedder: FakeEmbedder) -> None:
        self.live = live
        self.embedder = embedder
        client = sdk(live)
        self.owls = client.files.create(file=("owls.md", OWLS.encode()), purpose="assistants").id
        self.tides = client.files.create(file=("tides.txt", TIDES.encode()), purpose="assistants").id
        self.store = client.vector_stores.create(name="notes").id
        client.vector_stores.file_batches.create_and_poll(
            vector_store_id=self.store,
            files=[
                {"file_id": self.owls, "attributes": {"kind": "animal"}},
                {"file_id": self.tides, "attributes": {"kind": "sea"}},
            ],
        )

    @property
    def engine(self) -> FakeEngine:
        return self.live.engine  # type: ignore[no-any-return]

    def tool(self, **options: Any) -> list[Any]:
        return [{"type": "file_search", "vector_store_ids": [self.store], **options}]


def sdk(live: LiveServer, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url + "/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    root: Path = tmp_path_factory.mktemp("fsearch")
    write_keys_file(
        root / "keys.json", [{"key": KEY_A, "project": "proj_a"}, {"key": KEY_B, "project": "proj_b"}]
    )
    embedder = FakeEmbedder(max_input_tokens=100_000)
    config = Config(api_keys_file=str(root / "keys.json"))
    live = LiveServer(
        config, FakeEngine(), FakeInterpreter(), db=str(root / "r.db"), open_embedder=embedder.opener
    ).start()
    try:
        yield Fixture(live, embedder)
    finally:
        live.stop()


@pytest.fixture
def client(fx: Fixture) -> openai.OpenAI:
    fx.engine.reset()
    return sdk(fx.live)


def test_a_search_its_item_results_and_citation(fx: Fixture, client: openai.OpenAI) -> None:
    answer = f"Owls hunt at night [{fx.owls}]."
    fx.engine.reset(function_call("file_search", {"queries": ["owls at night"]}), say(answer))
    r = client.responses.create(
        model=MODEL, input="When do owls hunt?", tools=fx.tool(), include=["file_search_call.results"]
    )
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    call, message = r.output
    assert isinstance(call, ResponseFileSearchToolCall) and call.id.startswith("fs_")
    assert (call.status, call.queries) == ("completed", ["owls at night"])
    assert call.results is not None and call.results[0].file_id == fx.owls
    assert (call.results[0].filename, call.results[0].text) == ("owls.md", OWLS)
    assert call.results[0].attributes == {"kind": "animal"} and 0 < (call.results[0].score or 0) <= 1
    # Offered to the model as a function taking queries; it read each result under its file id and name.
    first, second = fx.engine.requests
    assert [t.name for t in first.tools] == ["file_search"]
    assert first.tools[0].parameters["required"] == ["queries"]
    assert second.turns[-2] == ToolCall(call.id, "file_search", '{"queries": ["owls at night"]}')
    shown = second.turns[-1]
    assert isinstance(shown, ToolResult) and shown.output.startswith(
        f"[1] file_id: {fx.owls} filename: owls.md"
    )
    assert "The barn owl hears mice under snow." in shown.output
    assert isinstance(message, ResponseOutputMessage)
    (citation,) = message.content[0].annotations  # type: ignore[union-attr]
    end = answer.index(fx.owls) + len(fx.owls)
    assert citation.model_dump() == {
        "type": "file_citation",
        "file_id": fx.owls,
        "filename": "owls.md",
        "index": end,
    }
    # A retrieve shows what the create asked for, or what its own include asks for.
    assert client.responses.retrieve(r.id).output[0].results == call.results  # type: ignore[union-attr]
    fx.engine.reset(function_call("file_search", {"queries": ["owls at night"]}), say(answer))
    bare = client.responses.create(model=MODEL, input="When do owls hunt?", tools=fx.tool())
    assert bare.output[0].results is None  # type: ignore[union-attr]
    assert client.responses.retrieve(bare.id).output[0].results is None  # type: ignore[union-attr]
    asked = client.responses.retrieve(bare.id, include=["file_search_call.results"])
    assert asked.output[0].results == call.results  # type: ignore[union-attr]


def test_the_stream_its_events_and_the_sdk_stream_helper(fx: Fixture, client: openai.OpenAI) -> None:
    script = (function_call("file_search", {"queries": ["tides", "moon"]}), say(f"See {fx.tides}."))
    fx.engine.reset(*script)
    body = {"model": MODEL, "input": "tides?", "tools": fx.tool(), "stream": True}
    headers = {"Authorization": f"Bearer {KEY_A}"}
    events = parse_sse(
        httpx.post(fx.live.base_url + "/v1/responses", json=body, headers=headers, timeout=60).text
    )
    check_stream(events)
    kinds = [
        e["type"]
        for e in events
        if "file_search" in e["type"] or e["type"].startswith("response.output_item")
    ]
    assert kinds[:5] == [
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.done",
    ]
    added = validate_as(ResponseFileSearchToolCall, events[2]["item"])
    assert (added.status, added.queries, added.results) == ("in_progress", [], None)
    done = validate_as(
        ResponseFileSearchToolCall,
        next(e for e in events if e["type"] == "response.output_item.done")["item"],
    )
    assert (done.status, done.queries, done.results) == ("completed", ["tides", "moon"], None)  # not included
    (note,) = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert note["annotation"] == {
        "type": "file_citation",
        "file_id": fx.tides,
        "filename": "tides.txt",
        "index": 4 + len(fx.tides),
    }

    fx.engine.reset(*script)
    with client.responses.stream(
        model=MODEL, input="tides?", tools=fx.tool(), include=["file_search_call.results"]
    ) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.file_search_call.completed" in types
    call = final.output[0]
    assert isinstance(call, ResponseFileSearchToolCall) and call.results is not None
    assert {r.file_id for r in call.results} == {fx.tides, fx.owls}  # max_num_results 10: both files


def test_the_tools_options_reach_the_search(fx: Fixture, client: openai.OpenAI) -> None:
    fx.engine.reset(function_call("file_search", {"queries": ["night moon sun"]}), say("ok"))
    r = client.responses.create(
        model=MODEL,
        input="q",
        tools=fx.tool(
            filters={"type": "eq", "key": "kind", "value": "sea"},
            max_num_results=1,
            ranking_options={"ranker": "auto", "score_threshold": 0.0},
        ),
        include=["file_search_call.results"],
    )
    (result,) = r.output[0].results  # type: ignore[union-attr, misc]
    assert result.file_id == fx.tides
    assert r.tools[0].model_dump(exclude_none=True) == {  # echoed as given
        "type": "file_search",
        "vector_store_ids": [fx.store],
        "filters": {"type": "eq", "key": "kind", "value": "sea"},
        "max_num_results": 1,
        "ranking_options": {"ranker": "auto", "score_threshold": 0.0},
    }


@pytest.mark.parametrize(
    ("tool", "status", "param"),
    [
        ({"vector_store_ids": ["vs_nope"]}, 404, "tools[0].vector_store_ids[0]"),
        ({"vector_store_ids": []}, 400, "tools[0].vector_store_ids"),
        ({"filters": {"type": "eq", "key": "kind"}}, 400, "tools[0].filters.value"),
        ({"filters": {"type": "xor", "filters": []}}, 400, "tools[0].filters.type"),
        ({"ranking_options": {"ranker": "none"}}, 400, "tools[0].ranking_options.ranker"),
        ({"ranking_options": {"score_threshold": 2}}, 400, "tools[0].ranking_options.score_threshold"),
        ({"max_num_results": 51}, 400, "tools[0].max_num_results"),
    ],
)
def test_a_bad_tool_is_refused_naming_its_field(
    fx: Fixture, client: openai.OpenAI, tool: dict[str, Any], status: int, param: str
) -> None:
    body = {"type": "file_search", "vector_store_ids": [fx.store], **tool}
    error = sdk_refusal(lambda: client.responses.create(model=MODEL, input="q", tools=[body]))
    assert error["param"] == param, error
    assert fx.engine.requests == []
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model=MODEL, input="q", tools=[body])
    assert caught.value.status_code == status


@pytest.mark.parametrize(
    "tools",
    [
        [
            {"type": "file_search", "vector_store_ids": ["vs_a"]},
            {"type": "file_search", "vector_store_ids": ["vs_b"]},
        ],
        [{"type": "file_search", "vector_store_ids": ["vs_a"]}, {"type": "function", "name": "file_search"}],
    ],
)
def test_one_file_search_and_no_tool_of_its_name(client: openai.OpenAI, tools: list[Any]) -> None:
    error = sdk_refusal(lambda: client.responses.create(model=MODEL, input="q", tools=tools))
    assert error["param"] == "tools"


def test_another_projects_store_is_not_found(fx: Fixture) -> None:
    error = sdk_refusal(lambda: sdk(fx.live, KEY_B).responses.create(model=MODEL, input="q", tools=fx.tool()))
    assert error["param"] == "tools[0].vector_store_ids[0]" and fx.store in error["message"]


def test_tool_choice_forces_it_and_allowed_tools_lists_it(fx: Fixture, client: openai.OpenAI) -> None:
    fx.engine.reset(function_call("file_search", {"queries": ["owls"]}), say("ok"))
    r = client.responses.create(model=MODEL, input="q", tools=fx.tool(), tool_choice={"type": "file_search"})
    assert fx.engine.requests[0].tool_choice == ForcedTool("file_search")
    assert r.tool_choice.model_dump() == {"type": "file_search"}  # type: ignore[union-attr]
    error = sdk_refusal(
        lambda: client.responses.create(model=MODEL, input="q", tool_choice={"type": "file_search"})
    )
    assert error["param"] == "tool_choice"

    fn = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    tools = [*fx.tool(), fn]
    for allowed, offered in (
        ([{"type": "file_search"}], ["file_search"]),
        ([{"type": "function", "name": "f"}], ["f"]),
    ):
        fx.engine.reset(say("ok"))
        client.responses.create(
            model=MODEL,
            input="q",
            tools=tools,  # type: ignore[arg-type]
            tool_choice={"type": "allowed_tools", "mode": "auto", "tools": allowed},  # type: ignore[typeddict-item]
        )
        assert [t.name for t in fx.engine.requests[0].tools] == offered


def test_a_failed_search_is_a_failed_call_and_the_response_goes_on(
    fx: Fixture, client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(inputs: Any) -> Embedded:
        raise EngineUnavailable("the embedding model is not running")

    monkeypatch.setattr(fx.embedder, "embed", down)
    fx.engine.reset(function_call("file_search", {"queries": ["owls"]}), say("The search failed."))
    r = client.responses.create(model=MODEL, input="q", tools=fx.tool(), include=["file_search_call.results"])
    assert r.status == "completed"
    assert (r.output[0].status, r.output[0].results) == ("failed", None)  # type: ignore[union-attr]
    read = fx.engine.requests[1].turns[-1]
    assert isinstance(read, ToolResult) and read.output.startswith("Error: the file search failed (")
    monkeypatch.undo()

    fx.engine.reset(function_call("file_search", {"queries": ["  "]}), say("No query."))
    r = client.responses.create(model=MODEL, input="q", tools=fx.tool())
    assert r.status == "completed" and r.output[0].status == "failed"  # type: ignore[union-attr]
    assert fx.engine.requests[1].turns[-1].output == "Error: the call gave no query."  # type: ignore[union-attr]


def test_an_expired_store_is_a_failed_call(fx: Fixture, client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="brief", expires_after={"anchor": "last_active_at", "days": 1})
    client.vector_stores.files.create_and_poll(file_id=fx.owls, vector_store_id=store.id)
    service = fx.live.app.state.vr.vector_stores
    service.clock = lambda: time.time() + 2 * 86400  # the service's clock, two days on
    try:
        fx.engine.reset(function_call("file_search", {"queries": ["owls"]}), say("It expired."))
        r = client.responses.create(
            model=MODEL, input="q", tools=[{"type": "file_search", "vector_store_ids": [store.id]}]
        )
    finally:
        service.clock = time.time
    assert r.status == "completed" and r.output[0].status == "failed"  # type: ignore[union-attr]
    read = fx.engine.requests[1].turns[-1]
    assert read.output == f"Error: the file search failed (The vector store {store.id} has expired.)."  # type: ignore[union-attr]


def _search_then(fx: Fixture, client: openai.OpenAI, **create: Any) -> Any:
    fx.engine.reset(function_call("file_search", {"queries": ["owls"]}), say("Owls."))
    return client.responses.create(model=MODEL, input="owls?", tools=fx.tool(), **create)


def test_the_call_given_back_reads_as_it_did(fx: Fixture, client: openai.OpenAI) -> None:
    first = _search_then(fx, client)
    call = first.output[0]
    read = fx.engine.requests[1].turns[-1]
    # previous_response_id: the kept call and its results.
    fx.engine.reset(say("again"))
    client.responses.create(model=MODEL, input="more", previous_response_id=first.id, tools=fx.tool())
    assert list(fx.engine.requests[0].turns[-4:-2]) == [
        ToolCall(call.id, "file_search", '{"queries": ["owls"]}'),
        read,
    ]
    # Given back as input without its results (as a client that did not include them holds it): the kept ones.
    items = [
        {"role": "user", "content": "owls?"},
        call.model_dump(exclude_none=True),
        {"role": "user", "content": "more"},
    ]
    fx.engine.reset(say("again"))
    client.responses.create(model=MODEL, input=items, tools=fx.tool())
    assert fx.engine.requests[0].turns[-2] == read
    # With its results (another server's call, say): those are what the model reads.
    foreign = {
        "type": "file_search_call",
        "id": "fs_elsewhere",
        "queries": ["q"],
        "status": "completed",
        "results": [
            {"file_id": "file-x", "filename": "x.txt", "score": 0.5, "text": "elsewhere", "attributes": {}}
        ],
    }
    fx.engine.reset(say("again"))
    client.responses.create(model=MODEL, input=[foreign, {"role": "user", "content": "more"}])
    assert fx.engine.requests[0].turns[-2] == ToolResult(
        "fs_elsewhere", "file_search", "[1] file_id: file-x filename: x.txt score: 0.500\nelsewhere"
    )


def test_a_conversation_keeps_the_call(fx: Fixture, client: openai.OpenAI) -> None:
    conversation = client.conversations.create()
    first = _search_then(fx, client, conversation=conversation.id)
    items = client.conversations.items.list(conversation.id, order="asc").data
    (kept,) = [i for i in items if i.type == "file_search_call"]
    assert kept.id == first.output[0].id and kept.results is None  # type: ignore[union-attr]
    shown = client.conversations.items.list(conversation.id, include=["file_search_call.results"]).data
    (full,) = [i for i in shown if i.type == "file_search_call"]
    assert full.results and full.results[0].file_id == fx.owls  # type: ignore[union-attr]
    read = fx.engine.requests[1].turns[-1]
    fx.engine.reset(say("again"))
    client.responses.create(model=MODEL, input="more", conversation=conversation.id, tools=fx.tool())
    assert read in fx.engine.requests[0].turns


def test_the_search_route_bounds_each_query(fx: Fixture) -> None:
    client = sdk(fx.live)
    long = "owl " * 1100
    error = sdk_refusal(lambda: client.vector_stores.search(fx.store, query=["owls", long]))
    assert (error["param"], error["code"]) == ("query[1]", "string_above_max_length")
    error = sdk_refusal(lambda: client.vector_stores.search(fx.store, query=long))
    assert error["param"] == "query"
    assert client.vector_stores.search(fx.store, query="owls").data
    body = json.dumps({"query": ["owls"] * 11})
    r = httpx.post(
        f"{fx.live.base_url}/v1/vector_stores/{fx.store}/search",
        content=body,
        headers={"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "query"


def test_websocket_mode_keeps_the_call_on_the_connection(fx: Fixture, client: openai.OpenAI) -> None:
    """A `store: false` response on a WebSocket connection: its file search, read by the next turn through its
    `previous_response_id` from the connection's cache, as the first turn read it."""
    fx.engine.reset(function_call("file_search", {"queries": ["owls"]}), say("Owls."), say("again"))
    ended = []
    with client.responses.connect() as connection:
        for body in ({"input": "owls?"}, {"input": "more"}):
            previous = {"previous_response_id": ended[-1]["id"]} if ended else {}
            connection.send(
                {
                    "type": "response.create",
                    "model": MODEL,
                    "store": False,
                    "tools": fx.tool(),
                    **body,
                    **previous,
                }
            )
            for event in connection:
                assert event.type != "error", event
                if event.type == "response.completed":
                    ended.append(event.response.model_dump(mode="json", exclude_unset=True))
                    break
    validate_response(ended[0])
    call = ended[0]["output"][0]
    assert (call["type"], call["status"], call["results"]) == ("file_search_call", "completed", None)
    read = fx.engine.requests[1].turns[-1]
    assert isinstance(read, ToolResult) and read.output.startswith(f"[1] file_id: {fx.owls}")
    assert fx.engine.requests[2].turns[-3] == read

"""WebSocket mode's connection-local cache and what the server alone keeps: a `store: false` response kept on the
connection keeps its searches whole, so that the next turn on the same connection shows the model a web search's
results and a tool search's found tools as the first turn did, through its `previous_response_id` or with its
items resent as input (an `item_reference` finds them too). Through the `openai` SDK's
`client.responses.connect()`, over the scripted engine and a fake SearXNG."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.searx import RESULTS, FakeSearx
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config
from vllm_responses.context.searches import NOT_KEPT
from vllm_responses.engine.types import Message, ToolCall, ToolResult

MODEL = "fake-model"
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
LOOKUP = {
    "type": "function",
    "name": "lookup_customer",
    "description": "Find a customer by name.",
    "defer_loading": True,
}


@pytest.fixture(scope="module")
def live(searx: FakeSearx) -> Iterator[LiveServer]:
    server = LiveServer(
        Config(web_search_url=searx.url, web_search_timeout=5.0), FakeEngine(), FakeInterpreter()
    )
    yield server.start()
    server.stop()


@pytest.fixture
def engine(live: LiveServer) -> FakeEngine:
    live.engine.reset()
    return live.engine  # type: ignore[no-any-return]


def turn(connection: Any, **body: Any) -> dict[str, Any]:
    """One `response.create` on the connection, `store: false`; its terminal response, validated."""
    connection.send({"type": "response.create", "model": MODEL, "store": False, **body})
    for event in connection:
        if event.type == "error":
            raise AssertionError(event.error.message)
        if event.type in TERMINAL:
            response: dict[str, Any] = event.response.model_dump(mode="json", exclude_unset=True)
            validate_response(response)
            assert response["status"] == "completed", response
            return response
    raise AssertionError("the connection closed before the response ended")


def connected(live: LiveServer) -> Any:
    client = openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)
    return client.responses.connect()


def test_a_web_search_s_results_survive_the_connection_cache(live: LiveServer, engine: FakeEngine) -> None:
    tools = [{"type": "web_search", "search_context_size": "low"}]
    engine.reset(function_call("web_search", {"query": "pep 703"}), say("Free threading."), say("Yes."))
    with connected(live) as connection:
        first = turn(connection, input="free threading?", tools=tools)
        read = engine.requests[-1].turns[-1]  # what the model read of the search, the first time
        second = turn(connection, input="more?", tools=tools, previous_response_id=first["id"])
    call = first["output"][0]
    assert call["type"] == "web_search_call" and "_search_results" not in call
    assert read == ToolResult(call["id"], "web_search", _results(3))
    turns = engine.requests[-1].turns
    assert turns[1:3] == (ToolCall(call["id"], "web_search", '{"query": "pep 703"}'), read)
    assert second["previous_response_id"] == first["id"]


def test_a_search_resent_as_input_on_the_connection_reads_as_it_did(
    live: LiveServer, engine: FakeEngine
) -> None:
    """A client that resends a `store: false` response's items as input on the connection that made them (in
    place of `previous_response_id`) has the model read the search's results from the connection's cache; on
    another connection the cache is gone, and the search reads as one whose results were not kept."""
    tools = [{"type": "web_search", "search_context_size": "low"}]
    engine.reset(
        function_call("web_search", {"query": "pep 703"}), say("Free threading."), say("Yes."), say("Hm.")
    )
    with connected(live) as connection:
        first = turn(connection, input="free threading?", tools=tools)
        read = engine.requests[-1].turns[-1]
        context = [
            {"role": "user", "content": "free threading?"},
            *first["output"],
            {"role": "user", "content": "more?"},
        ]
        turn(connection, input=context, tools=tools)
    call = first["output"][0]
    assert engine.requests[-1].turns[1:3] == (
        ToolCall(call["id"], "web_search", '{"query": "pep 703"}'),
        read,
    )
    with connected(live) as other:
        turn(other, input=context, tools=tools)
    assert engine.requests[-1].turns[2] == ToolResult(call["id"], "web_search", NOT_KEPT)


def test_an_item_reference_finds_an_item_of_the_connection_cache(
    live: LiveServer, engine: FakeEngine
) -> None:
    engine.reset(say("Blue."), say("Because."))
    with connected(live) as connection:
        first = turn(connection, input="Favourite colour?")
        reference = {"type": "item_reference", "id": first["output"][0]["id"]}
        turn(
            connection,
            input=[
                {"role": "user", "content": "Favourite colour?"},
                reference,
                {"role": "user", "content": "Why?"},
            ],
        )
    assert engine.requests[-1].turns[1] == Message("assistant", "Blue.")


def test_a_tool_search_s_found_tools_survive_the_connection_cache(
    live: LiveServer, engine: FakeEngine
) -> None:
    tools = [{"type": "tool_search"}, LOOKUP]
    engine.reset(function_call("tool_search", {"query": "customer"}), say("Found it."), say("Calling."))
    with connected(live) as connection:
        first = turn(connection, input="find a customer", tools=tools)
        read = engine.requests[-1].turns[-1]
        turn(connection, input="look Ada up", tools=tools, previous_response_id=first["id"])
    assert [it["type"] for it in first["output"]] == ["tool_search_call", "tool_search_output", "message"]
    assert read == ToolResult(
        first["output"][0]["call_id"],
        "tool_search",
        "Tools now available:\n- lookup_customer: Find a customer by name.",
    )
    assert read in engine.requests[-1].turns
    assert "lookup_customer" in [t.name for t in engine.requests[-1].tools]  # offered from then on


def _results(n: int) -> str:
    """What the model reads of the fake SearXNG's first `n` results."""
    return "\n\n".join(
        f"[{i}] {r['title']}\n{r['url']}\n{r['content'][:500]}" for i, r in enumerate(RESULTS[:n], 1)
    )

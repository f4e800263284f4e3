"""Tool search over the scripted engine: tools with `defer_loading: true` kept out of the prompt, a server-run
`tool_search` finding them (its `tool_search_call` and `tool_search_output` items as the SDK types them), the
tools found offered from the next model call and on later turns, a client-run search answered with a
`tool_search_output`, `additional_tools` items, and the 400s; the deferred tools bounded in number, indexed
once, and searched off the event loop."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
)

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import ToolResult
from vllm_responses.tools import tool_search

MODEL = "fake-model"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather forecast for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "defer_loading": True,
}
ADD = {"type": "function", "name": "add", "description": "Add two numbers."}
CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "The customer database.",
    "tools": [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find a customer by name.",
            "defer_loading": True,
        }
    ],
}
TOOLS: list[Any] = [{"type": "tool_search"}, WEATHER, ADD, CRM]


def offered(engine: FakeEngine, call: int = 0) -> list[str]:
    return [t.name for t in engine.requests[call].tools]


def test_a_server_search_finds_a_deferred_tool_and_offers_it(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(
        function_call("tool_search", {"query": "weather forecast"}),
        function_call("get_weather", {"city": "Oslo"}),
    )
    r = client.responses.create(model=MODEL, input="Weather in Oslo?", tools=TOOLS)
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    search, found, call = r.output
    assert isinstance(search, ResponseToolSearchCall) and search.execution == "server"
    assert search.arguments == {"query": "weather forecast"} and search.status == "completed"
    assert isinstance(found, ResponseToolSearchOutputItem) and found.call_id == search.call_id
    assert [t.name for t in found.tools] == ["get_weather"]  # type: ignore[union-attr]
    assert isinstance(call, ResponseFunctionToolCall) and call.name == "get_weather"
    # Deferred tools stay out of the first prompt; the one found is offered from the next call on.
    assert offered(engine, 0) == ["add", "tool_search"]
    assert offered(engine, 1) == ["add", "tool_search", "get_weather"]
    assert engine.requests[1].turns[-1] == ToolResult(
        search.call_id,
        "tool_search",
        "Tools now available:\n- get_weather: Weather forecast for a city.",  # type: ignore[arg-type]
    )
    # A later turn keeps it: the tool_search_output in the history loads it.
    engine.reset(say("Sunny."))
    client.responses.create(
        model=MODEL,
        previous_response_id=r.id,
        tools=TOOLS,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
    )
    assert offered(engine) == ["add", "get_weather", "tool_search"]


def test_a_namespaced_deferred_tool_is_found_with_its_namespace(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(function_call("tool_search", {"query": "customer"}), function_call("crm__lookup", {}))
    r = client.responses.create(model=MODEL, input="Find Ada.", tools=TOOLS)
    found, call = r.output[1], r.output[2]
    assert found.tools[0].type == "namespace" and found.tools[0].name == "crm"  # type: ignore[union-attr]
    assert call.namespace == "crm" and call.name == "lookup"  # type: ignore[union-attr]
    assert "crm__lookup" in offered(engine, 1)


def test_nothing_found_says_so(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(function_call("tool_search", {"query": "zebra"}), say("No tool."))
    r = client.responses.create(model=MODEL, input="q", tools=TOOLS)
    assert r.output[1].tools == []  # type: ignore[union-attr]
    assert engine.requests[1].turns[-1].output == "No tool matched; try other words."  # type: ignore[union-attr]


def test_the_stream_of_a_search(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(function_call("tool_search", {"query": "weather"}), say("ok"))
    body = {"model": MODEL, "input": "q", "tools": TOOLS, "stream": True}
    events = parse_sse(httpx.post(fake_server.base_url + "/v1/responses", json=body, timeout=30).text)
    check_stream(events)
    items = [e["item"]["type"] for e in events if e["type"] == "response.output_item.done"]
    assert items == ["tool_search_call", "tool_search_output", "message"]


def test_a_client_search_ends_the_response_and_its_output_loads_tools(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    tools: list[Any] = [
        {"type": "tool_search", "execution": "client", "description": "Search my tools."},
        ADD,
    ]
    engine.reset(function_call("tool_search", {"query": "weather"}))
    r = client.responses.create(model=MODEL, input="Weather?", tools=tools)
    (search,) = r.output
    assert isinstance(search, ResponseToolSearchCall) and search.execution == "client"
    assert engine.requests[0].tools[-1].description == "Search my tools."
    engine.reset(say("ok"))
    output = {
        "type": "tool_search_output",
        "call_id": search.call_id,
        "execution": "client",
        "tools": [WEATHER],
    }
    client.responses.create(model=MODEL, previous_response_id=r.id, tools=tools, input=[output])  # type: ignore[list-item]
    assert offered(engine) == ["add", "get_weather", "tool_search"]


def test_additional_tools_are_offered_from_the_context(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("ok"))
    extra = {"type": "additional_tools", "role": "developer", "tools": [{**WEATHER, "defer_loading": False}]}
    client.responses.create(model=MODEL, input=[{"role": "user", "content": "hi"}, extra], tools=[ADD])  # type: ignore[list-item]
    assert offered(engine) == ["add", "get_weather"]


def test_without_tool_search_deferred_tools_are_offered(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("ok"))
    client.responses.create(model=MODEL, input="q", tools=[WEATHER, ADD])
    assert offered(engine) == ["get_weather", "add"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": [{"type": "tool_search_output", "call_id": "nope", "tools": []}]}, "input"),
        ({"tools": [{"type": "tool_search", "execution": "elsewhere"}]}, "tools[0].execution"),
        ({"input": [{"type": "additional_tools", "role": "user", "tools": []}]}, "input[0].role"),
    ],
)
def test_bad_tool_search_bodies_are_a_400(fake_server: LiveServer, body: dict[str, Any], param: str) -> None:
    r = httpx.post(
        fake_server.base_url + "/v1/responses", json={"model": MODEL, "input": "q", **body}, timeout=30
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def _many(n: int) -> list[Any]:
    return [
        {"type": "function", "name": f"tool_{i}", "description": f"Tool number {i}.", "defer_loading": True}
        for i in range(n)
    ]


def test_more_deferred_tools_than_the_cap_is_a_400_naming_tools(fake_server: LiveServer) -> None:
    """Past `--max-deferred-tools` (5000 by default; namespaced tools count one by one) the request is refused
    before any tool is indexed."""
    default = Config().max_deferred_tools
    namespace = {**CRM, "tools": [*CRM["tools"], {**CRM["tools"][0], "name": "update"}]}  # type: ignore[dict-item]
    tools = [{"type": "tool_search"}, *_many(default - 1), namespace]
    r = httpx.post(
        fake_server.base_url + "/v1/responses",
        json={"model": MODEL, "input": "q", "tools": tools},
        timeout=60,
    )
    assert r.status_code == 400, r.text[:300]
    error = r.json()["error"]
    assert error["param"] == "tools" and error["code"] == "too_many_tools"
    assert error["type"] == "invalid_request_error" and str(default) in error["message"]


def test_a_lower_cap_lets_as_many_through_and_refuses_one_more() -> None:
    server = LiveServer(Config(max_deferred_tools=3), FakeEngine(), FakeInterpreter()).start()
    try:
        url = server.base_url + "/v1/responses"
        for n, status in ((3, 200), (4, 400)):
            body = {"model": MODEL, "input": "q", "tools": [{"type": "tool_search"}, *_many(n)]}
            assert httpx.post(url, json=body, timeout=30).status_code == status
    finally:
        server.stop()


def test_the_deferred_tools_are_indexed_once_per_request(
    client: openai.OpenAI, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two searches in one response: each deferred tool's words are read once, not once per search."""
    read: list[str] = []
    words = tool_search._words

    def counted(text: str) -> list[str]:
        read.append(text)
        return words(text)

    monkeypatch.setattr(tool_search, "_words", counted)
    engine.reset(
        function_call("tool_search", {"query": "weather"}),
        function_call("tool_search", {"query": "customer"}),
        say("ok"),
    )
    client.responses.create(model=MODEL, input="q", tools=TOOLS)
    assert sorted(read) == sorted(
        [
            "get_weather Weather forecast for a city.",
            "crm__lookup [crm: The customer database.] Find a customer by name.",
            "weather",
            "customer",
        ]
    )


def test_a_search_runs_off_the_event_loop(
    fake_server: LiveServer, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow search (its scorer held until the test lets it go) leaves the server answering: /health answers
    while the search is held, and the scoring ran in the `search` threads, not on the server's event loop."""
    entered, release = threading.Event(), threading.Event()
    threads: set[threading.Thread] = set()
    score = tool_search.DeferredTool.score

    def held(self: tool_search.DeferredTool, words: set[str]) -> int:
        threads.add(threading.current_thread())
        entered.set()
        release.wait(timeout=20)
        return score(self, words)

    monkeypatch.setattr(tool_search.DeferredTool, "score", held)
    engine.reset(function_call("tool_search", {"query": "weather"}), say("ok"))
    body = {"model": MODEL, "input": "q", "tools": TOOLS}
    with ThreadPoolExecutor(1) as pool:
        created = pool.submit(httpx.post, fake_server.base_url + "/v1/responses", json=body, timeout=60)
        try:
            assert entered.wait(timeout=30), "the search never ran"
            assert httpx.get(fake_server.base_url + "/health", timeout=5).status_code == 200
        finally:
            release.set()
        r = created.result()
    assert r.status_code == 200 and r.json()["output"][1]["tools"][0]["name"] == "get_weather"
    assert threads and fake_server.thread not in threads
    assert all(t.name.startswith("search") for t in threads)  # its own threads, not the default executor's

"""openai-agents (Python), unchanged, with its hosted `WebSearchTool` served (`--web-search-url`: a fake SearXNG on
127.0.0.1) over the scripted engine: the first run searches and answers; the next two runs resend every item of
the runs before (`to_input_list`, the `web_search_call` among them), and the model reads the search again as it
read it the first time: its query and its results."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import openai
import pytest
from agents import Agent, Runner, WebSearchTool, set_tracing_disabled
from agents.items import ToolCallItem
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses import ResponseFunctionWebSearch

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.searx import RESULTS, FakeSearx
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import ToolCall, ToolResult

MODEL = "fake-model"


@pytest.fixture(scope="module")
def live(searx: FakeSearx) -> Iterator[LiveServer]:
    server = LiveServer(Config(web_search_url=searx.url), FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


async def test_two_runs_after_a_search(
    live: LiveServer, searx: FakeSearx, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    engine: FakeEngine = live.engine  # type: ignore[assignment]
    engine.reset(
        function_call("web_search", {"query": "python 3.13 news"}),
        say("Python 3.13 adds a JIT."),
        say("It also adds free threading."),
        say("Both are experimental."),
    )
    client = async_sdk(live.base_url + "/v1")
    agent = Agent(
        name="searcher",
        instructions="Search the web when asked about news.",
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        tools=[WebSearchTool()],
    )
    first = await Runner.run(agent, "What is new in Python 3.13?")
    (call,) = [i.raw_item for i in first.new_items if isinstance(i, ToolCallItem)]
    assert isinstance(call, ResponseFunctionWebSearch) and call.status == "completed"
    assert searx.queries[-1]["q"] == ["python 3.13 news"]
    read = engine.requests[1].turns[-2:]  # the search as the model read it, in the first run
    assert read[0] == ToolCall(call.id, "web_search", '{"query": "python 3.13 news"}')
    assert isinstance(read[1], ToolResult) and read[1].output.startswith(f"[1] {RESULTS[0]['title']}\n")

    second = await Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": "Anything else?"}])
    assert second.final_output == "It also adds free threading."
    third = await Runner.run(
        agent, [*second.to_input_list(), {"role": "user", "content": "Are they stable?"}]
    )
    assert third.final_output == "Both are experimental."
    for request in engine.requests[2:]:  # each later run's model call reads the search as the first did
        at = request.turns.index(read[0])
        assert request.turns[at : at + 2] == read
    assert len(searx.queries) == 1  # searched once: later runs read the results the server kept

"""openai-agents (Python), unchanged, with its hosted `WebSearchTool` served (`--web-search-url`: a fake SearXNG on
127.0.0.1) over the real engine: vLLM on CPU with the tiny model, each model call forced by the server
(`ForcedEngine`, which records what each call was asked; the prompt a call saw is `engine.render` of it).

The first run searches and answers; the next two runs resend every item of the runs before (`to_input_list`,
the `web_search_call` among them), and each of their model calls reads the search in its prompt exactly as the
first run's answer read it: the call with its query, then the results."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import openai
import pytest
from agents import Agent, Runner, WebSearchTool, set_tracing_disabled
from agents.items import ToolCallItem
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses import ResponseFunctionWebSearch

from tests.clients.test_openai_agents import tool_call
from tests.support.real import TINY, ForcedEngine, tiny_model_server
from tests.support.searx import RESULTS, FakeSearx
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import ToolCall, ToolResult

pytestmark = [pytest.mark.engine, pytest.mark.slow]

QUERY = "python 3.13 news"
ANSWERS = ["Python 3.13 adds a JIT.", "It also adds free threading.", "Both are experimental."]


@pytest.fixture(scope="module")
def server(searx: FakeSearx) -> Iterator[LiveServer]:
    config = Config(web_search_url=searx.url)
    live = tiny_model_server(workers=0, max_model_len=4096, config=config, wrap=ForcedEngine)
    yield live
    live.stop()


def search_as_read(prompt: str) -> str:
    """The part of a prompt that shows the search: from the call's text through the end of its results."""
    start = prompt.index(f'"name": "web_search", "arguments": {{"query": "{QUERY}"}}')
    end = prompt.index(RESULTS[1]["title"], start)
    return prompt[start:end]


async def test_two_runs_after_a_search(
    server: LiveServer, searx: FakeSearx, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    engine: ForcedEngine = server.engine
    engine.plan = [tool_call("web_search", {"query": QUERY}), *ANSWERS]
    client = async_sdk(server.base_url + "/v1", timeout=300)
    agent = Agent(
        name="searcher",
        instructions="Search the web when asked about news.",
        model=OpenAIResponsesModel(model=TINY, openai_client=client),
        tools=[WebSearchTool()],
    )

    first = await Runner.run(agent, "What is new in Python 3.13?")
    assert first.final_output == ANSWERS[0]
    (call,) = [i.raw_item for i in first.new_items if isinstance(i, ToolCallItem)]
    assert isinstance(call, ResponseFunctionWebSearch) and call.status == "completed"
    assert searx.queries[-1]["q"] == [QUERY]
    read = engine.requests[1].turns[-2:]  # the search as the model read it, in the first run
    assert read[0] == ToolCall(call.id, "web_search", f'{{"query": "{QUERY}"}}')
    assert isinstance(read[1], ToolResult) and read[1].output.startswith(f"[1] {RESULTS[0]['title']}\n")
    shown = search_as_read(engine.render(engine.requests[1]))
    assert f"[1] {RESULTS[0]['title']}\n{RESULTS[0]['url']}\n{RESULTS[0]['content']}" in shown

    second_input = [*first.to_input_list(), {"role": "user", "content": "Anything else?"}]
    assert [i["type"] for i in second_input if i.get("type") == "web_search_call"] == ["web_search_call"]
    second = await Runner.run(agent, second_input)
    assert second.final_output == ANSWERS[1]
    third = await Runner.run(
        agent, [*second.to_input_list(), {"role": "user", "content": "Are they stable?"}]
    )
    assert third.final_output == ANSWERS[2]

    assert engine.plan == [] and len(engine.requests) == 4
    for request in engine.requests[2:]:  # each later run's model call reads the search as the first did
        at = request.turns.index(read[0])
        assert request.turns[at : at + 2] == read
        assert search_as_read(engine.render(request)) == shown
    assert len(searx.queries) == 1  # searched once: later runs read the results the server kept

"""openai-agents (Python), unchanged, with its hosted `FileSearchTool` served over a vector store of this server
(scripted engine, fake embedder): the first run searches (the results included, as `include_search_results` asks)
and answers citing the file; the next run resends every item of the first (`to_input_list`, the
`file_search_call` with its results among them), and the model reads the search again as it read it the first
time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest
from agents import Agent, FileSearchTool, Runner, set_tracing_disabled
from agents.items import MessageOutputItem, ToolCallItem
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses import ResponseFileSearchToolCall

from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.types import ToolCall, ToolResult

MODEL = "fake-model"
OWLS = "Owls hunt at night. The barn owl hears mice under snow."


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root: Path = tmp_path_factory.mktemp("agents_fsearch")
    embedder = FakeEmbedder(max_input_tokens=100_000)
    server = LiveServer(
        Config(), FakeEngine(), FakeInterpreter(), db=str(root / "r.db"), open_embedder=embedder.opener
    ).start()
    yield server
    server.stop()


async def test_two_runs_after_a_file_search(
    live: LiveServer, async_sdk: Callable[..., openai.AsyncOpenAI]
) -> None:
    set_tracing_disabled(True)
    sync = openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0)
    owls = sync.files.create(file=("owls.txt", OWLS.encode()), purpose="assistants").id
    store = sync.vector_stores.create(name="birds")
    sync.vector_stores.files.create_and_poll(file_id=owls, vector_store_id=store.id)

    engine: FakeEngine = live.engine  # type: ignore[assignment]
    engine.reset(
        function_call("file_search", {"queries": ["owls at night"]}),
        say(f"Owls hunt at night [{owls}]."),
        say("Barn owls hear mice under snow."),
    )
    client = async_sdk(live.base_url + "/v1")
    agent = Agent(
        name="librarian",
        instructions="Search the files before you answer.",
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        tools=[FileSearchTool(vector_store_ids=[store.id], max_num_results=3, include_search_results=True)],
    )
    first = await Runner.run(agent, "When do owls hunt?")
    (call,) = [i.raw_item for i in first.new_items if isinstance(i, ToolCallItem)]
    assert isinstance(call, ResponseFileSearchToolCall) and call.status == "completed"
    assert call.results and call.results[0].file_id == owls and call.results[0].filename == "owls.txt"
    (message,) = [i.raw_item for i in first.new_items if isinstance(i, MessageOutputItem)]
    (citation,) = message.content[0].annotations  # type: ignore[union-attr]
    assert (citation.type, citation.file_id) == ("file_citation", owls)  # type: ignore[union-attr]
    read = engine.requests[1].turns[-2:]  # the search as the model read it, in the first run
    assert read[0] == ToolCall(call.id, "file_search", '{"queries": ["owls at night"]}')
    assert isinstance(read[1], ToolResult) and read[1].output.startswith(
        f"[1] file_id: {owls} filename: owls.txt"
    )

    resent = [*first.to_input_list(), {"role": "user", "content": "What else?"}]
    assert [i["type"] for i in resent if i.get("type") == "file_search_call"] == ["file_search_call"]
    second = await Runner.run(agent, resent)
    assert second.final_output == "Barn owls hear mice under snow."
    assert list(engine.requests[2].turns[-4:-2]) == list(read)

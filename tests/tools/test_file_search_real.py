"""`file_search` over the real parts: vLLM on CPU with the tiny model (each model call forced: `ForcedEngine`), the
real embedded all-MiniLM-L6-v2, through the openai SDK (streamed): the model calls `file_search`, the server finds the
file by meaning, and the forced answer cites it; the call, its results, its events and the citation validate
against the SDK's types."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.types.responses import Response, ResponseFileSearchToolCall, ResponseOutputMessage

from tests.clients.test_openai_agents import tool_call
from tests.support.real import TINY, ForcedEngine, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, validate_response
from vllm_responses.engine.models import default_embedding_model_path
from vllm_responses.engine.types import ToolResult
from vllm_responses.server import open_embedder

pytestmark = pytest.mark.engine

DOCS = {
    "cats.txt": "A small kitten is sleeping on a soft rug by the warm fireplace.",
    "money.txt": "Quarterly revenue grew by five percent, and the company raised its profit forecast.",
}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    if default_embedding_model_path() is None:
        pytest.fail("the embedded embedding model is not set up: run scripts/setup.sh")
    live = tiny_model_server(workers=0, max_model_len=4096, wrap=ForcedEngine, open_embedder=open_embedder)
    yield live
    live.stop()


def test_the_model_searches_and_cites_the_file(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0, timeout=600)
    ids = {n: client.files.create(file=(n, t.encode()), purpose="assistants").id for n, t in DOCS.items()}
    store = client.vector_stores.create(name="pets")
    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=store.id, file_ids=list(ids.values()), poll_interval_ms=200
    )
    assert batch.file_counts.completed == 2, batch
    cats = ids["cats.txt"]
    answer = f"A kitten is asleep by the fire [{cats}]."
    engine: ForcedEngine = server.engine  # type: ignore[assignment]
    engine.plan = [tool_call("file_search", {"queries": ["cat napping"]}), answer]

    stream = client.responses.create(
        model=TINY,
        input="Where is the cat?",
        tools=[{"type": "file_search", "vector_store_ids": [store.id], "max_num_results": 1}],
        include=["file_search_call.results"],
        stream=True,
    )
    events = [event.model_dump(mode="json", exclude_unset=True) for event in stream]
    final = Response.model_validate(events[-1]["response"])
    check_stream(events)
    kinds = [e["type"] for e in events if "file_search" in e["type"]]
    assert kinds == [
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
    ]
    validate_response(final.model_dump(mode="json", exclude_unset=True, by_alias=True))
    call, message = final.output
    assert isinstance(call, ResponseFileSearchToolCall) and call.queries == ["cat napping"]
    assert call.status == "completed" and call.results is not None
    # by meaning: no word of the query is in the file found
    assert [(r.file_id, r.filename, r.text) for r in call.results] == [(cats, "cats.txt", DOCS["cats.txt"])]
    read = engine.requests[1].turns[-1]
    assert isinstance(read, ToolResult) and read.output.startswith(f"[1] file_id: {cats} filename: cats.txt")
    assert DOCS["cats.txt"] in engine.render(engine.requests[1])  # the prompt the answer was written from
    assert isinstance(message, ResponseOutputMessage) and message.content[0].text == answer  # type: ignore[union-attr]
    (citation,) = message.content[0].annotations  # type: ignore[union-attr]
    index = answer.index(cats) + len(cats)
    assert citation.model_dump() == {
        "type": "file_citation",
        "file_id": cats,
        "filename": "cats.txt",
        "index": index,
    }

"""The Vercel AI SDK (`ai` + `@ai-sdk/openai`), unchanged (`node/ai_sdk_file_search.mjs` on Node >= 22), with its
provider-executed `openai.tools.fileSearch` over a vector store of this server (scripted engine, fake embedder):
`generateText` and `streamText` each see the server's search as the SDK's own tool call and result (the queries,
the results it asked for with `include`), each file found as a document source, and the answer citing it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.clients.node_runner import run_script
from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.serving import LiveServer
from vllm_responses.config import Config

MODEL = "fake-model"
DOCS = {
    "owls.txt": "Owls hunt at night. The barn owl hears mice under snow.",
    "tides.txt": "Tides rise and fall twice a day, pulled by the moon.",
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root: Path = tmp_path_factory.mktemp("ai_sdk_fsearch")
    embedder = FakeEmbedder(max_input_tokens=100_000)
    server = LiveServer(
        Config(), FakeEngine(), FakeInterpreter(), db=str(root / "r.db"), open_embedder=embedder.opener
    ).start()
    yield server
    server.stop()


def test_generate_and_stream_with_file_search(live: LiveServer) -> None:
    client = openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0)
    ids = {n: client.files.create(file=(n, t.encode()), purpose="assistants").id for n, t in DOCS.items()}
    store = client.vector_stores.create(name="nature")
    client.vector_stores.files.create_and_poll(file_id=ids["owls.txt"], vector_store_id=store.id)
    client.vector_stores.files.create_and_poll(
        file_id=ids["tides.txt"], vector_store_id=store.id, attributes={"kind": "sea"}
    )
    owls = ids["owls.txt"]
    answer = f"Owls hunt at night [{owls}]."
    engine: FakeEngine = live.engine  # type: ignore[assignment]
    search = function_call("file_search", {"queries": ["owls at night"]})
    engine.reset(search, say(answer), search, say(answer))

    filters = {"type": "ne", "key": "kind", "value": "sea"}
    plan = {"model": MODEL, "vectorStoreId": store.id, "filters": filters, "prompt": "When do owls hunt?"}
    out = run_script("ai_sdk_file_search.mjs", live.base_url + "/v1", plan)

    # the SDK sent the tool as OpenAI's, and asked for the results
    tools = [body["tools"] for body in out["sent"]]
    assert tools == [[{"type": "file_search", "vector_store_ids": [store.id], "max_num_results": 3,
                       "filters": filters}]] * 2, tools  # fmt: skip
    assert all(body["include"] == ["file_search_call.results"] for body in out["sent"])
    # the filter reached the search: the sea file is left out
    assert [r.turns[-1].output.count("file_id:") for r in engine.requests[1::2]] == [1, 1]

    for run in (out["generated"]["content"], out["streamed"]["parts"]):
        calls = [p for p in run if p["type"] == "tool-call"]
        assert [(c["toolName"], c["providerExecuted"]) for c in calls] == [("file_search", True)], run
        (result,) = [p for p in run if p["type"] == "tool-result"]
        assert result["output"]["queries"] == ["owls at night"]
        (found,) = result["output"]["results"]
        assert (found["fileId"], found["filename"], found["text"]) == (owls, "owls.txt", DOCS["owls.txt"])
        assert 0 < found["score"] <= 1
        sources = [p for p in run if p["type"] == "source"]
        assert [(s["sourceType"], s["filename"], s["meta"]["openai"]["fileId"]) for s in sources] == [
            ("document", "owls.txt", owls)
        ]
    assert out["generated"]["text"] == answer and out["streamed"]["text"] == answer
    types = out["streamed"]["partTypes"]
    assert types.index("tool-call") < types.index("tool-result") < types.index("text-start"), types

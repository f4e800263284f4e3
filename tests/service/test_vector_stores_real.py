"""Vector stores on the real embedded all-MiniLM-L6-v2 (loaded in process on first use), through the openai SDK, on
a SQLite file and on Postgres with pgvector: files uploaded, a vector store, a batch polled to its end, a chunk
longer than the model's input, and searches with filters and ranking options that find by meaning what no keyword
of the query matches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types import VectorStoreSearchResponse
from openai.types.vector_stores import VectorStoreFileBatch

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.models import default_embedding_model_path
from vllm_responses.server import open_embedder

pytestmark = pytest.mark.engine

DOCS = {
    "cats.txt": "A small kitten is sleeping on a soft rug by the warm fireplace.",
    "money.txt": "Quarterly revenue grew by five percent, and the company raised its profit forecast.",
    # over 256 tokens in one chunk (auto chunks are 800): embedded as the mean of its windows
    "weather.md": "# Weather\n\n"
    + " ".join(["Heavy rain and strong wind are expected across the coast tonight."] * 40),
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    if default_embedding_model_path() is None:
        pytest.fail("the embedded embedding model is not set up: run scripts/setup.sh")
    root: Path = tmp_path_factory.mktemp("vstores_real")
    db = (
        str(root / "r.db")
        if request.param == "sqlite"
        else str(request.getfixturevalue("pgvector_module_url"))
    )
    live = LiveServer(Config(), FakeEngine(), FakeInterpreter(), db=db, open_embedder=open_embedder)
    yield live.start()
    live.stop()


def test_ingest_and_search_on_minilm(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="-", max_retries=0, timeout=600)
    ids = {n: client.files.create(file=(n, t.encode()), purpose="assistants").id for n, t in DOCS.items()}
    store = client.vector_stores.create(name="real")
    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=store.id,
        files=[
            {"file_id": ids["cats.txt"], "attributes": {"topic": "pets", "year": 2024}},
            {"file_id": ids["money.txt"], "attributes": {"topic": "finance", "year": 2023}},
            {"file_id": ids["weather.md"], "attributes": {"topic": "weather", "year": 2024}},
        ],
        poll_interval_ms=200,
    )
    batch = VectorStoreFileBatch.model_validate(batch.model_dump(exclude_unset=True))
    assert batch.status == "completed" and batch.file_counts.completed == 3, batch

    # by meaning alone: no word of the query is in the document it finds
    found = client.vector_stores.search(store.id, query="cat napping", ranking_options={"ranker": "none"})
    results = [VectorStoreSearchResponse.model_validate(r.model_dump(exclude_unset=True)) for r in found.data]
    assert results[0].file_id == ids["cats.txt"] and results[0].filename == "cats.txt", results
    assert results[0].score > results[-1].score

    storm = client.vector_stores.search(store.id, query="a storm is coming", max_num_results=1)
    assert [r.file_id for r in storm.data] == [ids["weather.md"]]

    # a query past the model's 256 tokens: embedded as the mean of its windows, as a long chunk is
    long = client.vector_stores.search(store.id, query="rain and wind on the coast " * 80, max_num_results=1)
    assert [r.file_id for r in long.data] == [ids["weather.md"]]

    earnings = client.vector_stores.search(
        store.id,
        query="company earnings",
        filters={"type": "eq", "key": "year", "value": 2024},
        ranking_options={"ranker": "auto", "score_threshold": 0.01},
    )
    assert ids["money.txt"] not in [r.file_id for r in earnings.data]
    assert {r.attributes["year"] for r in earnings.data if r.attributes} <= {2024}

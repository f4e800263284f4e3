"""Two replicas on one Postgres database with pgvector and the real all-MiniLM-L6-v2, through the openai SDK: A runs
the model in process, B embeds through A's `POST /v1/embeddings` (`--embedding-url`, the same model); a batch
uploaded and started on A is polled to its end and searched by meaning, with a filter, on B."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.types import VectorStoreSearchResponse
from openai.types.vector_stores import VectorStoreFileBatch

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.models import EMBEDDING_MODEL_NAME, default_embedding_model_path
from vllm_responses.server import open_embedder

pytestmark = pytest.mark.engine

DOCS = {
    "cats.txt": "A small kitten is sleeping on a soft rug by the warm fireplace.",
    "money.txt": "Quarterly revenue grew by five percent, and the company raised its profit forecast.",
    "dogs.txt": "The puppy dozed all afternoon in its basket near the window.",
}


@pytest.fixture
def replicas(pgvector_url: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    if default_embedding_model_path() is None:
        pytest.fail("the embedded embedding model is not set up: run scripts/setup.sh")
    started: list[LiveServer] = []
    try:
        beat = {"replica_heartbeat": 0.5}
        a = LiveServer(
            Config(replica_id="a", **beat), FakeEngine(), FakeInterpreter(), db=pgvector_url,
            open_embedder=open_embedder,
        )  # fmt: skip
        started.append(a.start())
        remote = Config(
            replica_id="b", embedding_url=a.base_url + "/v1", embedding_model=EMBEDDING_MODEL_NAME,
            embedding_timeout=600.0, **beat,
        )  # fmt: skip
        b = LiveServer(remote, FakeEngine(), FakeInterpreter(), db=pgvector_url, open_embedder=open_embedder)
        started.append(b.start())
        yield a, b
    finally:
        for server in started:
            server.stop()


def test_started_on_a_searched_by_meaning_on_b(replicas: tuple[LiveServer, LiveServer]) -> None:
    a, b = (
        openai.OpenAI(base_url=s.base_url + "/v1", api_key="-", max_retries=0, timeout=600) for s in replicas
    )
    ids = {n: a.files.create(file=(n, t.encode()), purpose="assistants").id for n, t in DOCS.items()}
    store = a.vector_stores.create(name="real-replicas")
    batch = a.vector_stores.file_batches.create(
        vector_store_id=store.id,
        files=[
            {"file_id": ids["cats.txt"], "attributes": {"topic": "pets", "year": 2024}},
            {"file_id": ids["money.txt"], "attributes": {"topic": "finance", "year": 2024}},
            {"file_id": ids["dogs.txt"], "attributes": {"topic": "pets", "year": 2023}},
        ],
    )
    done = b.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id, poll_interval_ms=200)
    done = VectorStoreFileBatch.model_validate(done.model_dump(exclude_unset=True))
    assert done.status == "completed" and done.file_counts.completed == 3, done

    # by meaning alone (no word of the query is in the file it finds), among the files the filter lets through
    found = b.vector_stores.search(
        store.id,
        query="cat napping",
        filters={"type": "eq", "key": "year", "value": 2024},
        ranking_options={"ranker": "none"},
    )
    results = [VectorStoreSearchResponse.model_validate(r.model_dump(exclude_unset=True)) for r in found.data]
    assert results[0].file_id == ids["cats.txt"] and results[0].filename == "cats.txt", results
    assert ids["dogs.txt"] not in [r.file_id for r in results]  # 2023: filtered out before ranking
    pets = b.vector_stores.search(
        store.id, query="a sleepy young dog", filters={"type": "eq", "key": "topic", "value": "pets"}
    )
    assert pets.data[0].file_id == ids["dogs.txt"]
    assert {r.file_id for r in pets.data} <= {ids["cats.txt"], ids["dogs.txt"]}

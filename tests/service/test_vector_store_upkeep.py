"""What vector stores stop keeping, through a live server and the `openai` SDK: a Files API file deleted leaves
every vector store that holds it (rows and chunks); an expired vector store is emptied by the sweep (its files and
chunks deleted, its bytes freed) and takes no more files; a file's `/content` is its parsed text (a PDF page by
page), not its overlapping chunks. Expiry is moved by the service's clock, not waited for."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai.types import VectorStore

from tests.service.test_vector_stores import DOCS, checked, sdk, serve, upload, wait_for
from tests.support.fake_embedder import FakeEmbedder
from tests.support.pdfs import make_pdf
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.service.vector_stores import VectorStoreService

DAY = 86400.0


class Clock:
    """The service's clock, `ahead` seconds past the wall clock."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        import time

        return time.time() + self.ahead


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    server = serve(tmp_path, FakeEmbedder(max_input_tokens=100_000))
    yield server
    server.stop()


def service(live: LiveServer) -> VectorStoreService:
    svc = live.app.state.vr.vector_stores
    assert svc is not None
    return svc


def chunks_of(live: LiveServer, vector_store_id: str) -> int:
    with sqlite3.connect(live.store.path) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM vector_store_chunks WHERE vector_store_id = ?", (vector_store_id,)
        ).fetchone()
    return int(count)


def test_a_deleted_file_leaves_every_vector_store_that_holds_it(live: LiveServer) -> None:
    client = sdk(live)
    owls, tides = upload(client, "owls.md", DOCS["owls.md"]), upload(client, "tides.txt", DOCS["tides.txt"])
    stores = [client.vector_stores.create(name=f"s{i}") for i in range(2)]
    for store in stores:
        batch = client.vector_stores.file_batches.create_and_poll(
            vector_store_id=store.id, file_ids=[owls, tides]
        )
        assert batch.file_counts.completed == 2
    assert client.files.delete(owls).deleted
    for store in stores:
        assert [r.file_id for r in client.vector_stores.search(store.id, query="owls night moon").data] == [
            tides
        ]
        assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id).data] == [tides]
        assert (
            sdk_refusal(lambda s=store: client.vector_stores.files.retrieve(owls, vector_store_id=s.id))[
                "param"
            ]
            == "file_id"
        )
        now = checked(client.vector_stores.retrieve(store.id), VectorStore)
        assert now.file_counts.total == 1 and now.file_counts.completed == 1
        assert (
            now.usage_bytes
            == client.vector_stores.files.retrieve(tides, vector_store_id=store.id).usage_bytes
        )
        assert chunks_of(live, store.id) == 1


def test_an_expired_vector_store_is_swept_and_takes_no_more_files(live: LiveServer) -> None:
    client = sdk(live)
    clock = Clock()
    service(live).clock = clock
    owls = upload(client, "owls.md", DOCS["owls.md"])
    kept = client.vector_stores.create(name="kept", file_ids=[owls])
    store = client.vector_stores.create(
        name="short", file_ids=[owls], expires_after={"anchor": "last_active_at", "days": 1}
    )
    for vs in (kept, store):
        assert client.vector_stores.files.poll(owls, vector_store_id=vs.id).status == "completed"
    assert client.vector_stores.retrieve(store.id).usage_bytes > 0 and chunks_of(live, store.id) == 1

    clock.ahead = 2 * DAY
    wait_for(lambda: chunks_of(live, store.id) == 0, "swept")
    swept = checked(client.vector_stores.retrieve(store.id), VectorStore)
    assert swept.status == "expired" and swept.usage_bytes == 0 and swept.file_counts.total == 0
    assert client.vector_stores.files.list(vector_store_id=store.id).data == []
    assert sdk_refusal(lambda: client.vector_stores.search(store.id, query="owls"))["code"] == "expired"
    refused = sdk_refusal(lambda: client.vector_stores.files.create(vector_store_id=store.id, file_id=owls))
    assert (refused["code"], refused["param"]) == ("expired", "vector_store_id")
    # a vector store that never expires keeps its chunks
    assert chunks_of(live, kept.id) == 1
    assert [r.file_id for r in client.vector_stores.search(kept.id, query="owls").data] == [owls]


def test_content_is_the_parsed_text_page_by_page_not_the_chunks(live: LiveServer) -> None:
    client = sdk(live)
    pdf = upload(client, "report.pdf", make_pdf(["Revenue rose. " * 40, "Outlook: steady."]))
    store = client.vector_stores.create(name="pdf")
    row = client.vector_stores.files.create_and_poll(
        file_id=pdf,
        vector_store_id=store.id,
        chunking_strategy={
            "type": "static",
            "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50},
        },
    )
    assert row.status == "completed"
    content = client.vector_stores.files.content(pdf, vector_store_id=store.id)
    assert [c.text for c in content.data] == [
        "--- page 1 of 2 ---\n" + ("Revenue rose. " * 40).strip(),
        "--- page 2 of 2 ---\nOutlook: steady.",
    ]
    assert chunks_of(live, store.id) >= 2  # the chunks, which overlap, are not what content shows


def test_a_file_past_its_expiry_is_swept_from_the_vector_stores(live: LiveServer) -> None:
    client = sdk(live)
    clock = Clock()
    service(live).clock = clock
    brief = client.files.create(
        file=("owls.md", DOCS["owls.md"].encode()),
        purpose="assistants",
        expires_after={"anchor": "created_at", "seconds": 3600},
    ).id
    tides = upload(client, "tides.txt", DOCS["tides.txt"])
    store = client.vector_stores.create(name="brief")
    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=store.id, file_ids=[brief, tides]
    )
    assert batch.file_counts.completed == 2
    clock.ahead = 2 * 3600
    assert [r.file_id for r in client.vector_stores.search(store.id, query="owls night").data] == [tides]
    wait_for(lambda: chunks_of(live, store.id) == 1, "swept")
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id).data] == [tides]

"""The Vector Stores API through a live server and the `openai` SDK, with the fake embedder, on each store that
serves it (a SQLite file, Postgres with pgvector): vector stores, their files and batches (the SDK's pollers),
search with filters and ranking options, each object validated against the SDK's types; the 4xx naming the param;
another project's objects not found; files that cannot be read failing with OpenAI's codes; an ingestion a restart
interrupted taken up again; a batch cancelled. The memory store serves them too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types import VectorStore, VectorStoreSearchResponse
from openai.types.vector_stores import VectorStoreFile, VectorStoreFileBatch

from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.config import Config
from vllm_responses.engine.embedder import Embedded, EmbedInput

KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"

DOCS = {
    "owls.md": "# Owls\n\nOwls hunt at night. The barn owl hears mice under snow.\n",
    "tides.txt": "Tides rise and fall twice a day, pulled by the moon and the sun.\n",
    "bread.txt": "Bread rises when yeast turns sugar into gas; bake it hot and brief.\n",
}


def keyed(root: Path, **config: Any) -> Config:
    entries = [{"key": KEY_A, "project": "proj_a"}, {"key": KEY_B, "project": "proj_b"}]
    write_keys_file(root / "keys.json", entries)
    return Config(api_keys_file=str(root / "keys.json"), replica_heartbeat=0.2, **config)


def serve(root: Path, embedder: FakeEmbedder, db: str | None = None, **config: Any) -> LiveServer:
    """A server over `db` (default: a SQLite file in `root`)."""
    live = LiveServer(
        keyed(root, **config),
        FakeEngine(),
        FakeInterpreter(),
        db=db or str(root / "r.db"),
        open_embedder=embedder.opener,
    )
    return live.start()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("vstores")
    db = None if request.param == "sqlite" else str(request.getfixturevalue("pgvector_module_url"))
    live = serve(root, FakeEmbedder(max_input_tokens=100_000), db)
    yield live
    live.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A test's own database: a SQLite file, or Postgres with pgvector."""
    if request.param == "sqlite":
        return str(tmp_path / "r.db")
    return str(request.getfixturevalue("pgvector_url"))


def sdk(server: LiveServer, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def upload(client: openai.OpenAI, name: str, data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return client.files.create(file=(name, raw), purpose="assistants").id


def checked(model: Any, kind: Any) -> Any:
    """The object as the server sent it, validated against the SDK's type (the SDK itself does not validate)."""
    return kind.model_validate(model.model_dump(exclude_unset=True))


def test_store_files_batches_and_search(server: LiveServer) -> None:
    client = sdk(server)
    ids = {name: upload(client, name, text) for name, text in DOCS.items()}
    store = checked(
        client.vector_stores.create(
            name="notes", metadata={"team": "a"}, expires_after={"anchor": "last_active_at", "days": 7}
        ),
        VectorStore,
    )
    assert (store.object, store.name, store.metadata, store.status) == (
        "vector_store",
        "notes",
        {"team": "a"},
        "completed",
    )
    assert store.expires_after is not None and store.expires_after.days == 7
    assert store.expires_at == store.last_active_at + 7 * 86400
    assert store.file_counts.total == 0 and store.usage_bytes == 0

    one = client.vector_stores.files.create_and_poll(
        file_id=ids["owls.md"], vector_store_id=store.id, attributes={"kind": "animal", "year": 2021}
    )
    one = checked(one, VectorStoreFile)
    assert (one.status, one.last_error, one.attributes) == (
        "completed",
        None,
        {"kind": "animal", "year": 2021},
    )
    assert one.usage_bytes > 0 and one.chunking_strategy is not None
    assert one.chunking_strategy.type == "static"

    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=store.id,
        files=[
            {"file_id": ids["tides.txt"], "attributes": {"kind": "sea", "year": 2023}},
            {
                "file_id": ids["bread.txt"],
                "attributes": {"kind": "food", "year": 2024},
                "chunking_strategy": {
                    "type": "static",
                    "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0},
                },
            },
        ],
    )
    batch = checked(batch, VectorStoreFileBatch)
    assert batch.status == "completed" and batch.file_counts.completed == 2 and batch.file_counts.total == 2
    in_batch = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    assert sorted(f.id for f in in_batch.data) == sorted([ids["tides.txt"], ids["bread.txt"]])
    bread = client.vector_stores.files.retrieve(ids["bread.txt"], vector_store_id=store.id)
    assert bread.chunking_strategy is not None and bread.chunking_strategy.model_dump()["static"] == {
        "max_chunk_size_tokens": 100,
        "chunk_overlap_tokens": 0,
    }

    now = checked(client.vector_stores.retrieve(store.id), VectorStore)
    assert now.file_counts.completed == 3 and now.status == "completed" and now.usage_bytes > one.usage_bytes

    found = client.vector_stores.search(store.id, query="owl night")
    results = [checked(r, VectorStoreSearchResponse) for r in found.data]
    assert results[0].file_id == ids["owls.md"] and results[0].filename == "owls.md"
    assert results[0].content[0].text == DOCS["owls.md"] and results[0].attributes == {
        "kind": "animal",
        "year": 2021,
    }
    assert all(0 <= r.score <= 1 for r in results)

    filtered = client.vector_stores.search(
        store.id,
        query=["rise", "moon"],
        filters={
            "type": "and",
            "filters": [
                {"type": "gte", "key": "year", "value": 2023},
                {"type": "ne", "key": "kind", "value": "food"},
            ],
        },
        ranking_options={"ranker": "auto", "score_threshold": 0.0},
        max_num_results=5,
        rewrite_query=True,
    )
    assert [r.file_id for r in filtered.data] == [ids["tides.txt"]]
    assert len(client.vector_stores.search(store.id, query="owl", max_num_results=1).data) == 1

    # attributes updated: the search's filter sees them at once
    client.vector_stores.files.update(ids["owls.md"], vector_store_id=store.id, attributes={"kind": "bird"})
    birds = client.vector_stores.search(
        store.id, query="owl", filters={"type": "eq", "key": "kind", "value": "bird"}
    )
    assert [r.file_id for r in birds.data] == [ids["owls.md"]]

    content = client.vector_stores.files.content(ids["tides.txt"], vector_store_id=store.id)
    assert [c.text for c in content.data] == [DOCS["tides.txt"]]

    listed = client.vector_stores.files.list(
        vector_store_id=store.id, filter="completed", order="asc", limit=2
    )
    assert len(listed.data) == 2 and listed.has_more
    assert [
        f.id for f in client.vector_stores.files.list(vector_store_id=store.id, filter="failed").data
    ] == []

    renamed = client.vector_stores.update(store.id, name="renamed", expires_after=None)
    assert renamed.name == "renamed" and renamed.expires_after is None and renamed.expires_at is None
    assert store.id in [s.id for s in client.vector_stores.list().data]

    gone = client.vector_stores.files.delete(ids["owls.md"], vector_store_id=store.id)
    assert gone.deleted and gone.id == ids["owls.md"]
    assert all(r.file_id != ids["owls.md"] for r in client.vector_stores.search(store.id, query="owl").data)
    assert client.vector_stores.delete(store.id).deleted
    assert sdk_refusal(lambda: client.vector_stores.retrieve(store.id))["param"] == "vector_store_id"


def test_create_with_file_ids_and_upload_and_poll(server: LiveServer) -> None:
    client = sdk(server)
    first = upload(client, "owls.md", DOCS["owls.md"])
    store = client.vector_stores.create(name="s", file_ids=[first])
    assert store.file_counts.total == 1
    done = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("tides.txt", DOCS["tides.txt"].encode())
    )
    assert done.status == "completed"
    for _ in range(200):
        if client.vector_stores.retrieve(store.id).status == "completed":
            break
        time.sleep(0.05)
    assert client.vector_stores.retrieve(store.id).file_counts.completed == 2
    batch = client.vector_stores.file_batches.upload_and_poll(
        vector_store_id=store.id, files=[("bread.txt", DOCS["bread.txt"].encode())], poll_interval_ms=100
    )
    assert batch.status == "completed" and batch.file_counts.completed == 1
    assert client.vector_stores.retrieve(store.id).file_counts.completed == 3


def test_bad_input_is_a_400_naming_the_param(server: LiveServer) -> None:
    client = sdk(server)
    store = client.vector_stores.create(name="e")
    cases = [
        (
            lambda: client.vector_stores.create(expires_after={"anchor": "last_active_at", "days": 0}),
            "expires_after.days",
        ),
        (
            lambda: client.vector_stores.create(expires_after={"anchor": "created_at", "days": 1}),
            "expires_after.anchor",
        ),
        (lambda: client.vector_stores.create(metadata={"k": 1}), "metadata.k"),
        (lambda: client.vector_stores.create(file_ids=["file-nope"]), "file_ids[0]"),
        (
            lambda: client.vector_stores.create(
                chunking_strategy={
                    "type": "static",
                    "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 0},
                }
            ),
            "chunking_strategy.static.max_chunk_size_tokens",
        ),
        (lambda: client.vector_stores.files.create(vector_store_id=store.id, file_id="file-nope"), "file_id"),
        (lambda: client.vector_stores.search(store.id, query=""), "query"),
        (lambda: client.vector_stores.search(store.id, query="x", max_num_results=0), "max_num_results"),
        (
            lambda: client.vector_stores.search(
                store.id, query="x", filters={"type": "near", "key": "a", "value": 1}
            ),
            "filters.type",
        ),
        (
            lambda: client.vector_stores.search(store.id, query="x", ranking_options={"ranker": "best"}),
            "ranking_options.ranker",
        ),
        (lambda: client.vector_stores.files.list(vector_store_id=store.id, filter="done"), "filter"),
        (lambda: client.vector_stores.list(limit=101), "limit"),
        (lambda: client.vector_stores.file_batches.create(vector_store_id=store.id), "file_ids"),
        (
            lambda: client.vector_stores.file_batches.retrieve("vsfb_nope", vector_store_id=store.id),
            "batch_id",
        ),
        (lambda: client.vector_stores.retrieve("vs_0123456789abcdef01234567"), "vector_store_id"),
    ]
    for call, param in cases:
        error = sdk_refusal(call)
        assert error["param"] == param, (param, error)


def test_another_projects_objects_are_not_found(server: LiveServer) -> None:
    a, b = sdk(server, KEY_A), sdk(server, KEY_B)
    file_id = upload(a, "owls.md", DOCS["owls.md"])
    store = a.vector_stores.create(name="private", file_ids=[file_id])
    refusals = [
        lambda: b.vector_stores.retrieve(store.id),
        lambda: b.vector_stores.search(store.id, query="owl"),
        lambda: b.vector_stores.files.list(vector_store_id=store.id),
        lambda: b.vector_stores.files.retrieve(file_id, vector_store_id=store.id),
        lambda: b.vector_stores.delete(store.id),
        lambda: b.vector_stores.create(file_ids=[file_id]),
    ]
    for call in refusals:
        with pytest.raises(openai.NotFoundError):
            call()
    assert store.id not in [s.id for s in b.vector_stores.list().data]
    assert a.vector_stores.retrieve(store.id).id == store.id


def test_unreadable_files_fail_with_openais_codes(server: LiveServer) -> None:
    client = sdk(server)
    store = client.vector_stores.create(name="bad")
    binary = upload(client, "blob.bin", bytes(range(256)))
    latin = upload(client, "latin.txt", "caf\xe9".encode("latin-1"))
    for file_id, code in ((binary, "unsupported_file"), (latin, "invalid_file")):
        row = checked(
            client.vector_stores.files.create_and_poll(file_id=file_id, vector_store_id=store.id),
            VectorStoreFile,
        )
        assert row.status == "failed" and row.last_error is not None and row.last_error.code == code, row
    counts = client.vector_stores.retrieve(store.id).file_counts
    assert (counts.failed, counts.completed) == (2, 0)


def test_html_is_read_as_its_prose(server: LiveServer) -> None:
    client = sdk(server)
    page = (
        "<html><head><title>Night birds</title><script>var secret = 'zebra';</script></head>"
        "<body><h1>Owls</h1><p>Owls hunt at night.</p></body></html>"
    )
    store = client.vector_stores.create(name="html")
    file_id = upload(client, "page.html", page)
    assert (
        client.vector_stores.files.create_and_poll(file_id=file_id, vector_store_id=store.id).status
        == "completed"
    )
    (text,) = [c.text for c in client.vector_stores.files.content(file_id, vector_store_id=store.id).data]
    assert text is not None and "Owls hunt at night." in text and text.startswith("Night birds")
    assert "<" not in text and "zebra" not in text


class StuckEmbedder(FakeEmbedder):
    """A fake whose calls never end (until cancelled): its ingestion stays in progress."""

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded:
        self.running += 1
        try:
            await asyncio.Event().wait()
        finally:
            self.running -= 1
        raise AssertionError("unreachable")


def wait_for(check: Any, what: str) -> None:
    for _ in range(600):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"never {what}")


@pytest.mark.parametrize(("next_id", "lease"), [("one", 600.0), ("two", 1.0)])
def test_restart_resumes_an_interrupted_ingestion(
    tmp_path: Path, db: str, next_id: str, lease: float
) -> None:
    """Under the same `--replica-id` its files are taken back at start (a lease of 10 minutes not waited for);
    under another, once their lease expired."""
    stuck = StuckEmbedder(max_input_tokens=100_000)
    live = serve(tmp_path, stuck, db, replica_id="one", replica_lease=lease)
    try:
        client = sdk(live)
        file_id = upload(client, "owls.md", DOCS["owls.md"])
        store = client.vector_stores.create(name="r", file_ids=[file_id])
        wait_for(lambda: stuck.running > 0, "embedding")
    finally:
        live.stop()
    live = serve(
        tmp_path, FakeEmbedder(max_input_tokens=100_000), db, replica_id=next_id, replica_lease=lease
    )
    try:
        client = sdk(live)
        row = client.vector_stores.files.poll(file_id, vector_store_id=store.id, max_wait_seconds=20)
        assert row.status == "completed"
        assert [r.file_id for r in client.vector_stores.search(store.id, query="owl").data] == [file_id]
    finally:
        live.stop()


def test_cancel_a_batch(tmp_path: Path, db: str) -> None:
    stuck = StuckEmbedder(max_input_tokens=100_000)
    live = serve(tmp_path, stuck, db)
    try:
        client = sdk(live)
        ids = [upload(client, name, text) for name, text in DOCS.items()]
        store = client.vector_stores.create(name="c")
        batch = client.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=ids)
        assert batch.status == "in_progress" and batch.file_counts.in_progress == 3
        wait_for(lambda: stuck.running > 0, "embedding")
        cancelled = checked(
            client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id), VectorStoreFileBatch
        )
        assert cancelled.status == "cancelled" and cancelled.file_counts.cancelled == 3
        wait_for(lambda: stuck.running == 0, "stopped embedding")
        files = client.vector_stores.files.list(vector_store_id=store.id, filter="cancelled")
        assert sorted(f.id for f in files.data) == sorted(ids)
        assert client.vector_stores.retrieve(store.id).status == "completed"
        assert (
            client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).status
            == "cancelled"
        )
    finally:
        live.stop()


def test_lists_page_both_ways(server: LiveServer) -> None:
    client = sdk(server, KEY_B)
    made = [client.vector_stores.create(name=f"p{i}").id for i in range(3)]
    newest_first = [s.id for s in client.vector_stores.list(limit=2)]  # the SDK follows `after` itself
    assert newest_first[:3] == made[::-1]
    first = client.vector_stores.list(limit=2)
    assert [s.id for s in first.data] == made[:0:-1] and first.has_more
    before = client.vector_stores.list(before=made[0], order="desc")
    assert [s.id for s in before.data] == made[:0:-1]
    oldest = client.vector_stores.list(order="asc", after=made[0], limit=1)
    assert [s.id for s in oldest.data] == [made[1]]
    for store_id in made:
        client.vector_stores.delete(store_id)


def test_a_memory_store_serves_vector_stores(tmp_path: Path) -> None:
    live = LiveServer(
        Config(), FakeEngine(), FakeInterpreter(), open_embedder=FakeEmbedder(max_input_tokens=100_000).opener
    ).start()
    try:
        client = sdk(live)
        file_id = upload(client, "owls.md", DOCS["owls.md"])
        store = client.vector_stores.create(name="m")
        assert (
            client.vector_stores.files.create_and_poll(file_id=file_id, vector_store_id=store.id).status
            == "completed"
        )
        assert [r.file_id for r in client.vector_stores.search(store.id, query="owls").data] == [file_id]
    finally:
        live.stop()


def test_vector_stores_count_in_the_projects_stored_bytes(tmp_path: Path, db: str) -> None:
    live = serve(tmp_path, FakeEmbedder(max_input_tokens=100_000), db, project_max_stored_bytes=2000)
    try:
        client = sdk(live)
        text = "owls " * 60  # 300 bytes: the file, and about as much again as its chunk
        store = client.vector_stores.create(name="q")
        row = client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=("o.txt", text.encode())
        )
        assert row.status == "completed" and row.usage_bytes >= 300
        assert client.vector_stores.retrieve(store.id).usage_bytes == row.usage_bytes
        # 300 (the file) + 1400 fit in 2000; with the vector store's bytes they do not
        error = sdk_refusal(lambda: client.files.create(file=("big.txt", b"x" * 1400), purpose="assistants"))
        assert error["code"] == "storage_quota_exceeded"
        client.vector_stores.delete(store.id)
        assert client.files.create(file=("big.txt", b"x" * 1400), purpose="assistants").bytes == 1400
    finally:
        live.stop()

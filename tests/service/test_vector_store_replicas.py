"""Vector stores served by two replicas sharing one Postgres database with pgvector, through the `openai` SDK (the
fake embedder, one per replica): files and a batch added on A are ingested once (by either replica), polled to
their end and searched with a filter on B; a change made on one replica is seen by the other's next search; a batch
cancelled on B while A ingests it keeps no chunk; a response on B whose `file_search` finds a file ingested on A; a file whose ingestion A held when it was killed (SIGKILL) is taken
over by B once A's lease has expired."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import openai
import pytest
from openai.types import VectorStore, VectorStoreSearchResponse
from openai.types.responses import ResponseFileSearchToolCall, ResponseOutputMessage
from openai.types.vector_stores import VectorStoreFile, VectorStoreFileBatch

from tests.service.test_vector_stores import DOCS, checked, upload, wait_for
from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.postgres import PostgresServer
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config

LEASE = 1.0  # seconds a replica's claim on a file lasts unrenewed
HEARTBEAT = 0.2


def replica(db: str, replica_id: str, embedder: FakeEmbedder) -> LiveServer:
    config = Config(replica_id=replica_id, replica_heartbeat=HEARTBEAT, replica_lease=LEASE)
    return LiveServer(config, FakeEngine(), FakeInterpreter(), db=db, open_embedder=embedder.opener).start()


def sdk(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key="-", max_retries=0, timeout=30)


def embedded_by(embedder: FakeEmbedder, text: str) -> int:
    """How many times `embedder` embedded `text` (as a chunk)."""
    return sum(call.count(text) for call in embedder.calls)


@pytest.fixture
def two(pgvector_url: str) -> Iterator[list[tuple[LiveServer, FakeEmbedder]]]:
    """Replicas A and B on one database, each with its embedder."""
    started: list[tuple[LiveServer, FakeEmbedder]] = []
    try:
        for name in ("a", "b"):
            embedder = FakeEmbedder(max_input_tokens=100_000)
            started.append((replica(pgvector_url, name, embedder), embedder))
        yield started
    finally:
        for server, _ in started:
            server.stop()


def test_added_on_a_searched_on_b(two: list[tuple[LiveServer, FakeEmbedder]]) -> None:
    a, b = (sdk(server.base_url) for server, _ in two)
    ids = {name: upload(a, name, text) for name, text in DOCS.items()}
    store = a.vector_stores.create(name="shared")
    a.vector_stores.files.create(
        file_id=ids["owls.md"], vector_store_id=store.id, attributes={"kind": "animal", "year": 2021}
    )
    batch = a.vector_stores.file_batches.create(
        vector_store_id=store.id,
        files=[
            {"file_id": ids["tides.txt"], "attributes": {"kind": "sea", "year": 2023}},
            {"file_id": ids["bread.txt"], "attributes": {"kind": "food", "year": 2024}},
        ],
    )

    # on B: each file, the batch and the store polled to their end, as the SDK types them
    owl = checked(b.vector_stores.files.poll(ids["owls.md"], vector_store_id=store.id), VectorStoreFile)
    assert (owl.status, owl.attributes) == ("completed", {"kind": "animal", "year": 2021})
    done = checked(
        b.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id, poll_interval_ms=100),
        VectorStoreFileBatch,
    )
    assert done.status == "completed" and (done.file_counts.completed, done.file_counts.total) == (2, 2)
    seen = checked(b.vector_stores.retrieve(store.id), VectorStore)
    assert seen.status == "completed" and seen.file_counts.completed == 3 and seen.usage_bytes > 0
    assert seen.usage_bytes == a.vector_stores.retrieve(store.id).usage_bytes
    for name, text in DOCS.items():  # ingested once, by one replica or the other
        assert sum(embedded_by(embedder, text) for _, embedder in two) == 1, name

    found = b.vector_stores.search(
        store.id, query="owl night", filters={"type": "eq", "key": "kind", "value": "animal"}
    )
    results = [checked(r, VectorStoreSearchResponse) for r in found.data]
    assert [(r.file_id, r.filename) for r in results] == [(ids["owls.md"], "owls.md")]
    assert results[0].content[0].text == DOCS["owls.md"]
    sea = b.vector_stores.search(
        store.id,
        query=["rise", "moon"],
        filters={
            "type": "and",
            "filters": [
                {"type": "gte", "key": "year", "value": 2023},
                {"type": "ne", "key": "kind", "value": "food"},
            ],
        },
    )
    assert [r.file_id for r in sea.data] == [ids["tides.txt"]]

    # A searched (its catalogue of the store loaded), then B changes the store: A's next search sees it
    assert [r.file_id for r in a.vector_stores.search(store.id, query="owl").data][0] == ids["owls.md"]
    b.vector_stores.files.update(ids["owls.md"], vector_store_id=store.id, attributes={"kind": "bird"})
    birds = a.vector_stores.search(
        store.id, query="owl", filters={"type": "eq", "key": "kind", "value": "bird"}
    )
    assert [r.file_id for r in birds.data] == [ids["owls.md"]]
    b.vector_stores.files.delete(ids["owls.md"], vector_store_id=store.id)
    assert ids["owls.md"] not in [r.file_id for r in a.vector_stores.search(store.id, query="owl").data]
    assert b.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        a.vector_stores.retrieve(store.id)


def chunks_of(db: str, vector_store_id: str) -> int:
    """How many chunks the database holds of the vector store."""

    async def read() -> int:
        conn = await asyncpg.connect(db)
        try:
            return int(
                await conn.fetchval(
                    "SELECT count(*) FROM vector_store_chunks WHERE vector_store_id = $1", vector_store_id
                )
            )
        finally:
            await conn.close()

    return asyncio.run(read())


def test_a_batch_cancelled_on_b_while_a_ingests_it(pgvector_url: str) -> None:
    """A holds both files (its embedder held at a gate) when B cancels the batch: A's work, once let go, keeps
    no chunk, and both replicas report the batch and its files cancelled."""
    held = FakeEmbedder(max_input_tokens=100_000)
    held.gate = threading.Event()
    started: list[LiveServer] = []
    try:
        started.append(replica(pgvector_url, "a", held))
        a = sdk(started[0].base_url)
        ids = [upload(a, name, text) for name, text in list(DOCS.items())[:2]]
        store = a.vector_stores.create(name="cancelled")
        batch = a.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=ids)
        wait_for(lambda: held.running == 2, "both files embedding on A")
        started.append(replica(pgvector_url, "b", FakeEmbedder(max_input_tokens=100_000)))
        b = sdk(started[1].base_url)
        cancelled = checked(
            b.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id), VectorStoreFileBatch
        )
        assert cancelled.status == "cancelled" and cancelled.file_counts.cancelled == 2
        held.gate.set()  # A's embedding answers: its files were cancelled meanwhile
        wait_for(
            lambda: held.running == 0 and not started[0].app.state.vr.vector_stores.ingestion.working,
            "A done",
        )
        assert chunks_of(pgvector_url, store.id) == 0
        for client in (a, b):
            assert (
                client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).status
                == "cancelled"
            )
            listed = client.vector_stores.files.list(vector_store_id=store.id, filter="cancelled")
            assert sorted(f.id for f in listed.data) == sorted(ids)
            assert client.vector_stores.search(store.id, query="owl").data == []
    finally:
        if held.gate is not None:
            held.gate.set()
        for server in started:
            server.stop()


# --- a replica killed with SIGKILL while it ingests (a process of its own, tests/support/replica_proc.py) ----------


def spawn_stuck(db: str, replica_id: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    """A replica whose embedder never answers: a file it claims stays in its ingestion, under its lease."""
    argv = [sys.executable, "-m", "tests.support.replica_proc", db, replica_id, str(LEASE), "stuck"]
    with log.open("w") as err:  # the child has its own copy of the file
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    base = proc.stdout.readline().strip()
    assert base.startswith("http://"), log.read_text()[-3000:]
    return proc, base


def lease_of(db: str, file_id: str) -> tuple[Any, ...]:
    """The file's status and lease owner, as the database holds them."""

    async def read() -> tuple[Any, ...]:
        conn = await asyncpg.connect(db)
        try:
            row = await conn.fetchrow(
                "SELECT status, lease_owner FROM vector_store_files WHERE file_id = $1", file_id
            )
        finally:
            await conn.close()
        return tuple(row) if row is not None else ()

    return asyncio.run(read())


def test_a_killed_replicas_ingestion_is_taken_over(pgvector_url: str, tmp_path: Path) -> None:
    proc, base = spawn_stuck(pgvector_url, "doomed", tmp_path / "a.log")
    b_server: LiveServer | None = None
    try:
        a = sdk(base)
        file_id = upload(a, "owls.md", DOCS["owls.md"])
        store = a.vector_stores.create(name="taken-over", file_ids=[file_id])
        wait_for(lambda: lease_of(pgvector_url, file_id) == ("in_progress", "doomed"), "claimed by A")
        embedder = FakeEmbedder(max_input_tokens=100_000)
        b_server = replica(pgvector_url, "b", embedder)
        b = sdk(b_server.base_url)
        # A alive: it renews its lease past its length, and B leaves the file to it
        time.sleep(2 * LEASE + HEARTBEAT)
        assert b.vector_stores.retrieve(store.id).file_counts.in_progress == 1
        assert lease_of(pgvector_url, file_id) == ("in_progress", "doomed") and embedder.calls == []
    finally:
        proc.kill()
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()
    try:
        assert b_server is not None
        row = b.vector_stores.files.poll(file_id, vector_store_id=store.id, poll_interval_ms=100)
        assert row.status == "completed" and embedded_by(embedder, DOCS["owls.md"]) == 1
        found = b.vector_stores.search(store.id, query="owl night")
        assert [r.file_id for r in found.data] == [file_id]
    finally:
        if b_server is not None:
            b_server.stop()


# --- the database down, then back ----------------------------------------------------------------------------


def test_vector_stores_through_a_postgres_outage(
    pgvector_url: str, pgvector_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Down: a 503 `store_unavailable` (never a 500), and the ingestion's heartbeats warn without a traceback;
    back: files added are ingested and searched."""
    live = replica(pgvector_url, "a", FakeEmbedder(max_input_tokens=100_000))
    try:
        client = sdk(live.base_url)
        store = client.vector_stores.create(name="outage")
        first = client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=("owls.md", DOCS["owls.md"].encode())
        )
        assert first.status == "completed"
        pgvector_server.halt()
        try:
            for call in (
                lambda: client.vector_stores.retrieve(store.id),
                lambda: client.vector_stores.search(store.id, query="owl"),
            ):
                with pytest.raises(openai.InternalServerError) as raised:
                    call()
                assert raised.value.status_code == 503 and isinstance(raised.value.body, dict)
                assert raised.value.body["code"] == "store_unavailable"
            caplog.clear()
            time.sleep(3 * HEARTBEAT)  # a few heartbeats' claims fail
        finally:
            pgvector_server.resume()
        failed = [r for r in caplog.records if "claiming files failed" in r.getMessage()]
        assert failed and all(r.levelname == "WARNING" and r.exc_info is None for r in failed)
        second = client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=("tides.txt", DOCS["tides.txt"].encode())
        )
        assert second.status == "completed"
        found = client.vector_stores.search(store.id, query="moon tides", max_num_results=1)
        assert [r.file_id for r in found.data] == [second.id]
    finally:
        live.stop()


def test_file_search_on_b_finds_what_a_ingested(two: list[tuple[LiveServer, FakeEmbedder]]) -> None:
    (server_a, _), (server_b, _) = two
    a, b = sdk(server_a.base_url), sdk(server_b.base_url)
    owls = upload(a, "owls.md", DOCS["owls.md"])
    store = a.vector_stores.create(name="shared", file_ids=[owls, upload(a, "tides.txt", DOCS["tides.txt"])])
    wait_for(lambda: a.vector_stores.retrieve(store.id).status == "completed", "ingested")

    engine: FakeEngine = server_b.engine
    answer = f"Owls hunt at night [{owls}]."
    engine.reset(function_call("file_search", {"queries": ["owls at night"]}), say(answer))
    r = b.responses.create(
        model="fake-model",
        input="When do owls hunt?",
        tools=[{"type": "file_search", "vector_store_ids": [store.id], "max_num_results": 1}],
        include=["file_search_call.results"],
    )
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    call, message = r.output
    assert isinstance(call, ResponseFileSearchToolCall) and call.status == "completed"
    assert call.results is not None and [(x.file_id, x.filename) for x in call.results] == [(owls, "owls.md")]
    assert isinstance(message, ResponseOutputMessage)
    annotations = message.content[0].annotations  # type: ignore[union-attr]
    assert [(c.type, c.file_id) for c in annotations] == [("file_citation", owls)]
    # A reads B's response back, the call's results with it, from the shared store
    again = a.responses.retrieve(r.id, include=["file_search_call.results"])
    assert again.output[0].results == call.results  # type: ignore[union-attr]

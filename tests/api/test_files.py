"""The Files API through a live server and the `openai` SDK: create, list (paging), retrieve, content, delete; the
4xx for bad input naming the param; each project seeing only its own files; expiry; quotas; two replicas on one
Postgres database reading each other's files."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types import FileDeleted, FileObject

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.config import Config
from vllm_responses.store.memory import MemoryStore

KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"
UPLOAD_MOST = 64 * 1024


def keyed(root: Path, **config: Any) -> Config:
    """Two projects (keys A and B), multipart uploads of at most `UPLOAD_MOST` bytes."""
    entries = [{"key": KEY_A, "project": "proj_a"}, {"key": KEY_B, "project": "proj_b"}]
    write_keys_file(root / "keys.json", entries)
    return Config(api_keys_file=str(root / "keys.json"), max_upload_bytes=UPLOAD_MOST, **config)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("files")
    live = LiveServer(keyed(root), FakeEngine(), FakeInterpreter(), db=str(root / "r.db"))
    yield live.start()
    live.stop()


def sdk(server: LiveServer, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def checked(file: FileObject) -> FileObject:
    """The file as the server sent it, validated against the SDK's type (the SDK itself does not validate)."""
    return FileObject.model_validate(file.model_dump(exclude_unset=True))


def crud(client: openai.OpenAI) -> None:
    """Create three files, page through them, read one back and delete it, through the SDK."""
    made = [
        checked(client.files.create(file=(f"n{i}.txt", f"note {i}".encode()), purpose="user_data"))
        for i in range(3)
    ]
    batch = checked(
        client.files.create(
            file=("jobs.jsonl", b"{}\n"),
            purpose="batch",
            expires_after={"anchor": "created_at", "seconds": 3600},
        )
    )
    assert made[0].id.startswith("file-") and made[0].object == "file" and made[0].status == "processed"
    assert (made[0].filename, made[0].bytes, made[0].purpose, made[0].expires_at) == (
        "n0.txt",
        6,
        "user_data",
        None,
    )
    assert batch.expires_at == batch.created_at + 3600
    newest_first = [f.id for f in client.files.list(limit=2)]  # the SDK follows the cursor page by page
    assert newest_first == [batch.id, *[f.id for f in reversed(made)]]
    first = client.files.list(limit=2)
    assert first.has_more and [f.id for f in first.data] == newest_first[:2]
    assert [f.id for f in client.files.list(order="asc", purpose="user_data")] == [f.id for f in made]
    assert client.files.retrieve(made[1].id) == made[1]
    assert client.files.content(made[1].id).read() == b"note 1"
    gone = client.files.delete(made[1].id)
    assert FileDeleted.model_validate(gone.model_dump()) == FileDeleted(
        id=made[1].id, object="file", deleted=True
    )
    for call in (client.files.retrieve, client.files.content, client.files.delete):
        error = sdk_refusal(lambda call=call: call(made[1].id))  # type: ignore[misc]
        assert error["code"] == "not_found" and error["param"] == "file_id"


def test_files_are_made_listed_read_and_deleted_through_the_sdk(server: LiveServer) -> None:
    crud(sdk(server))


def test_a_large_file_comes_back_whole_with_its_type_and_inert(server: LiveServer) -> None:
    data = bytes(range(256)) * 200
    made = sdk(server).files.create(file=("table.csv", data), purpose="assistants")
    with httpx.stream(
        "GET", f"{server.base_url}/v1/files/{made.id}/content", headers={"Authorization": f"Bearer {KEY_A}"}
    ) as r:
        body = r.read()
    assert body == data and r.headers["content-type"].startswith("text/csv")
    assert (
        r.headers["x-content-type-options"] == "nosniff" and "sandbox" in r.headers["content-security-policy"]
    )


def _post(server: LiveServer, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
    auth = {"Authorization": f"Bearer {KEY_A}", **(headers or {})}
    return httpx.post(f"{server.base_url}/v1/files", headers=auth, timeout=60, **kw)


def test_bad_input_is_a_4xx_naming_the_param(server: LiveServer) -> None:
    client = sdk(server)
    cases: list[tuple[Any, int, str]] = [
        (lambda: client.files.create(file=("a.txt", b"a"), purpose="nonsense"), 400, "purpose"),  # type: ignore[arg-type]
        (
            lambda: client.files.create(
                file=("a.txt", b"a"),
                purpose="user_data",
                expires_after={"anchor": "created_at", "seconds": 60},
            ),
            400,
            "expires_after.seconds",
        ),
        (
            lambda: client.files.create(
                file=("a.txt", b"a"),
                purpose="user_data",
                expires_after={"anchor": "now", "seconds": 3600},  # type: ignore[typeddict-item]
            ),
            400,
            "expires_after.anchor",
        ),
        (
            lambda: client.files.create(file=("big.bin", b"x" * (UPLOAD_MOST + 1)), purpose="user_data"),
            413,
            "file",
        ),
        (lambda: client.files.create(file=("..", b"a"), purpose="user_data"), 400, "file"),
        (lambda: client.files.list(limit=0), 400, "limit"),
        (lambda: client.files.list(order="sideways"), 400, "order"),  # type: ignore[arg-type]
    ]
    for call, status, param in cases:
        with pytest.raises(openai.APIStatusError) as caught:
            call()
        assert (caught.value.status_code, caught.value.body["param"]) == (status, param), caught.value.body  # type: ignore[index]
    no_file = _post(server, data={"purpose": "user_data"}, files={"other": ("a.txt", b"a")})
    assert no_file.status_code == 400 and no_file.json()["error"]["param"] == "file"
    as_json = _post(server, json={"purpose": "user_data"})
    assert as_json.status_code == 400 and as_json.json()["error"]["param"] == "file"
    assert sdk(server).files.list(purpose="fine-tune").data == []


def test_a_project_never_sees_another_projects_files(server: LiveServer) -> None:
    a, b = sdk(server, KEY_A), sdk(server, KEY_B)
    mine = a.files.create(file=("secret.txt", b"A's secret"), purpose="user_data")
    assert mine.id not in [f.id for f in b.files.list()]
    for call in (b.files.retrieve, b.files.content, b.files.delete):
        error = sdk_refusal(lambda call=call: call(mine.id))  # type: ignore[misc]
        assert error["code"] == "not_found"
    assert b.files.list(after=mine.id).data == []  # not a cursor for another project either
    assert a.files.retrieve(mine.id).id == mine.id  # still there


@pytest.fixture
def memory_server(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(keyed(tmp_path), FakeEngine(), FakeInterpreter())
    yield live.start()
    live.stop()


def test_an_expired_file_is_not_found_nor_listed_and_is_deleted(memory_server: LiveServer) -> None:
    client = sdk(memory_server)
    made = client.files.create(
        file=("t.txt", b"temp"), purpose="user_data", expires_after={"anchor": "created_at", "seconds": 3600}
    )
    kept = client.files.create(file=("k.txt", b"kept"), purpose="user_data")
    store = memory_server.store
    assert isinstance(store, MemoryStore)
    row = store._files[made.id]
    store._files[made.id] = dataclasses.replace(row, expires_at=time.time() - 1)  # its hour has passed
    assert [f.id for f in client.files.list()] == [kept.id]
    assert sdk_refusal(lambda: client.files.retrieve(made.id))["code"] == "not_found"
    assert made.id not in store._files and made.id not in store._chunks  # deleted when looked up


def test_stored_bytes_bound_files_per_project(tmp_path: Path) -> None:
    live = LiveServer(keyed(tmp_path, project_max_stored_bytes=1000), FakeEngine(), FakeInterpreter()).start()
    try:
        a, b = sdk(live, KEY_A), sdk(live, KEY_B)
        a.files.create(file=("one.bin", b"x" * 600), purpose="user_data")
        full = sdk_refusal(lambda: a.files.create(file=("two.bin", b"x" * 600), purpose="user_data"))
        assert full["code"] == "storage_quota_exceeded" and "600" in full["message"]
        alone = sdk_refusal(lambda: a.files.create(file=("big.bin", b"x" * 1001), purpose="user_data"))
        assert alone["code"] == "storage_quota_exceeded" and alone["param"] == "file"
        b.files.create(file=("two.bin", b"x" * 600), purpose="user_data")  # another project's own bound
        declared = sdk_refusal(
            lambda: a.uploads.create(bytes=500, filename="u.bin", mime_type="text/plain", purpose="user_data")
        )
        assert declared["code"] == "storage_quota_exceeded"
    finally:
        live.stop()


@pytest.fixture
def pg_replicas(pg_url: str, tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two servers (replicas) on one Postgres database."""
    one = LiveServer(keyed(tmp_path), FakeEngine(), FakeInterpreter(), db=pg_url).start()
    two = LiveServer(keyed(tmp_path), FakeEngine(), FakeInterpreter(), db=pg_url).start()
    yield one, two
    one.stop()
    two.stop()


def test_files_on_postgres_are_read_by_every_replica(pg_replicas: tuple[LiveServer, LiveServer]) -> None:
    one, two = pg_replicas
    crud(sdk(one))
    data = b"0123456789" * 20_000  # four parts
    done = sdk(one).uploads.upload_file_chunked(
        file=data,
        filename="pg.txt",
        bytes=len(data),
        mime_type="text/plain",
        purpose="assistants",
        part_size=60_000,
    )
    assert done.status == "completed" and done.file is not None
    other = sdk(two)
    assert other.files.content(done.file.id).read() == data  # made on one replica, read on the other
    assert done.file.id in [f.id for f in other.files.list()]
    assert sdk_refusal(lambda: sdk(two, KEY_B).files.retrieve(done.file.id))["code"] == "not_found"  # type: ignore[union-attr]
    box = other.containers.create(name="copied", file_ids=[done.file.id])
    assert two.interpreter.files[box.id]["/mnt/data/pg.txt"] == data
    other.files.delete(done.file.id)
    assert sdk_refusal(lambda: sdk(one).files.retrieve(done.file.id))["code"] == "not_found"  # type: ignore[union-attr]


def test_files_and_parts_are_bounded_by_the_upload_limit_while_they_stream(tmp_path: Path) -> None:
    """Bodies on /v1/files and an upload's parts take --max-upload-bytes (here 64 KiB, above the 16 KiB of
    --max-request-bytes); past it a 413 naming the field, before the body is read or while it streams in."""
    live = LiveServer(keyed(tmp_path, max_request_bytes=16 * 1024), FakeEngine(), FakeInterpreter()).start()
    try:
        client = sdk(live)
        fits = client.files.create(file=("fits.bin", b"a" * UPLOAD_MOST), purpose="user_data")
        assert fits.bytes == UPLOAD_MOST
        upload = client.uploads.create(
            bytes=UPLOAD_MOST, filename="u.bin", mime_type="application/octet-stream", purpose="user_data"
        )
        assert client.uploads.parts.create(upload.id, data=b"p" * UPLOAD_MOST).upload_id == upload.id
        far = b"b" * (4 * UPLOAD_MOST)  # past the multipart slack: refused on its Content-Length
        for call, param in (
            (lambda: client.files.create(file=("big.bin", far), purpose="user_data"), "file"),
            (lambda: client.uploads.parts.create(upload.id, data=far), "data"),
        ):
            with pytest.raises(openai.APIStatusError) as caught:
                call()
            assert caught.value.status_code == 413
            assert caught.value.body["code"] == "file_too_large" and caught.value.body["param"] == param  # type: ignore[index]

        def endless() -> Iterator[bytes]:
            yield b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n'
            for _ in range(64):  # 4 MiB, never terminated: refused long before
                yield b"c" * 65536

        r = _post(live, content=endless(), headers={"Content-Type": "multipart/form-data; boundary=xyz"})
        assert r.status_code == 413 and r.json()["error"]["param"] == "file"
        assert [f.id for f in client.files.list()] == [fits.id]
    finally:
        live.stop()

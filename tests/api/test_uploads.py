"""The Uploads API through a live server and the `openai` SDK: the SDK's chunked helper makes a file from parts,
sizes and md5 are checked, parts past the declared size or the part bound are refused, cancel, expiry, and
another project's upload is not found."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types import Upload
from openai.types.uploads import UploadPart

from tests.api.test_files import KEY_A, KEY_B, UPLOAD_MOST, keyed, sdk
from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.store.memory import MemoryStore

FILE_MOST = 300_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("uploads")
    live = LiveServer(keyed(root, max_file_bytes=FILE_MOST), FakeEngine(), FakeInterpreter())
    yield live.start()
    live.stop()


def _new(client: openai.OpenAI, size: int, name: str = "big.txt") -> Upload:
    return client.uploads.create(bytes=size, filename=name, mime_type="text/plain", purpose="assistants")


def test_the_sdks_chunked_helper_makes_one_file_of_the_parts(server: LiveServer) -> None:
    client = sdk(server)
    data = bytes(range(256)) * 1000  # 256000 bytes: five parts, each within --max-upload-bytes
    done = client.uploads.upload_file_chunked(
        file=data,
        filename="big.bin",
        bytes=len(data),
        mime_type="application/octet-stream",
        purpose="assistants",
        part_size=UPLOAD_MOST - 1000,
        md5=hashlib.md5(data).hexdigest(),
    )
    assert Upload.model_validate(done.model_dump(exclude_unset=True)).status == "completed"
    assert done.file is not None and done.file.bytes == len(data) and done.file.filename == "big.bin"
    assert done.expires_at == done.created_at + 3600
    assert client.files.content(done.file.id).read() == data
    assert done.file.id in [f.id for f in client.files.list(purpose="assistants")]


def test_parts_are_assembled_in_the_order_completion_names(server: LiveServer) -> None:
    client = sdk(server)
    upload = _new(client, 8)
    first = client.uploads.parts.create(upload.id, data=b"1234")
    second = client.uploads.parts.create(upload.id, data=b"5678")
    assert UploadPart.model_validate(first.model_dump()).upload_id == upload.id and first.id.startswith(
        "part_"
    )
    done = client.uploads.complete(upload.id, part_ids=[second.id, first.id])
    assert done.file is not None and client.files.content(done.file.id).read() == b"56781234"


def test_sizes_parts_and_md5_are_checked_naming_the_param(server: LiveServer) -> None:
    client = sdk(server)
    too_big = sdk_refusal(lambda: _new(client, FILE_MOST + 1))
    assert too_big["param"] == "bytes" and too_big["code"] == "file_too_large"
    assert (
        sdk_refusal(lambda: client.uploads.create(bytes=1, filename="x", mime_type="t", purpose="bad"))[
            "param"
        ]
        == "purpose"
    )  # type: ignore[arg-type]
    assert sdk_refusal(lambda: _new(client, 1, "../x"))["param"] == "filename"
    upload = _new(client, 10)
    part = client.uploads.parts.create(upload.id, data=b"123456")
    past = sdk_refusal(lambda: client.uploads.parts.create(upload.id, data=b"12345"))
    assert past["param"] == "data" and "10" in past["message"]
    with pytest.raises(openai.APIStatusError) as caught:
        client.uploads.parts.create(upload.id, data=b"x" * (UPLOAD_MOST + 1))
    assert caught.value.status_code == 413 and caught.value.body["param"] == "data"  # type: ignore[index]
    short = sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[part.id]))
    assert short["param"] == "part_ids" and "6" in short["message"]
    unknown = sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[part.id, "part_" + "0" * 24]))
    assert unknown["param"] == "part_ids[1]"
    assert sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[]))["param"] == "part_ids"
    rest = client.uploads.parts.create(upload.id, data=b"7890")
    twice = sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[part.id, part.id]))
    assert twice["param"] == "part_ids"
    wrong = sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[part.id, rest.id], md5="0" * 32))
    assert wrong["param"] == "md5"
    done = client.uploads.complete(
        upload.id, part_ids=[part.id, rest.id], md5=hashlib.md5(b"1234567890").hexdigest()
    )
    assert done.status == "completed"
    again = sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[part.id, rest.id]))
    assert again["param"] == "upload_id" and "completed" in again["message"]


def test_a_cancelled_upload_takes_no_parts(server: LiveServer) -> None:
    client = sdk(server)
    upload = _new(client, 4)
    client.uploads.parts.create(upload.id, data=b"12")
    cancelled = client.uploads.cancel(upload.id)
    assert cancelled.status == "cancelled" and cancelled.file is None
    late = sdk_refusal(lambda: client.uploads.parts.create(upload.id, data=b"34"))
    assert late["param"] == "upload_id" and "cancelled" in late["message"]


def test_another_projects_upload_is_not_found(server: LiveServer) -> None:
    a, b = sdk(server, KEY_A), sdk(server, KEY_B)
    upload = _new(a, 2)
    part = a.uploads.parts.create(upload.id, data=b"ab")
    for call in (
        lambda: b.uploads.parts.create(upload.id, data=b"ab"),
        lambda: b.uploads.complete(upload.id, part_ids=[part.id]),
        lambda: b.uploads.cancel(upload.id),
        lambda: b.uploads.cancel("upload_" + "0" * 24),
    ):
        error = sdk_refusal(call)
        assert error["code"] == "not_found" and error["param"] == "upload_id"
    assert a.uploads.complete(upload.id, part_ids=[part.id]).status == "completed"


def test_an_upload_expires_after_an_hour(tmp_path: Path) -> None:
    live = LiveServer(keyed(tmp_path), FakeEngine(), FakeInterpreter()).start()
    try:
        client = sdk(live)
        upload = _new(client, 2)
        part = client.uploads.parts.create(upload.id, data=b"ab")
        store = live.store
        assert isinstance(store, MemoryStore)
        row = store._uploads[upload.id]
        store._uploads[upload.id] = dataclasses.replace(
            row, expires_at=time.time() - 1
        )  # its hour has passed
        late = sdk_refusal(lambda: client.uploads.complete(upload.id, part_ids=[part.id]))
        assert late["param"] == "upload_id" and "expired" in late["message"]
    finally:
        live.stop()

"""The files half of every store (memory, SQLite, a real Postgres): a file's bytes in chunks, listing with cursors,
uploads whose parts become a file in order, cancels, the sweep of expired files and uploads, stored bytes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from vllm_responses.store.base import CHUNK_BYTES, ResponseStore, StoredFile, StoredUpload
from vllm_responses.store.open import store_for


@pytest.fixture
async def store(store_db: str) -> AsyncIterator[ResponseStore]:
    s = store_for(store_db)
    await s.open()
    yield s
    await s.aclose()


async def _bytes_of(store: ResponseStore, owner_id: str) -> bytes:
    return b"".join(await store.read_chunks(owner_id, 0, 1000))


def _file(i: int, project: str = "p", purpose: str = "user_data", **kw: object) -> StoredFile:
    """File `i` of `project`, of 4 bytes."""
    return StoredFile(f"file-{i:024x}", project, f"f{i}.txt", purpose, 4, 1000.0 + i, **kw)  # type: ignore[arg-type]


async def test_a_file_is_kept_in_chunks_and_read_back_whole(store: ResponseStore) -> None:
    data = bytes(range(256)) * (CHUNK_BYTES // 256 * 2 + 3)  # two full chunks and a bit
    file = StoredFile("file-" + "a" * 24, "p", "big.bin", "assistants", len(data), 1000.0)
    await store.add_file(file, data)
    assert await store.get_file(file.id) == file
    assert [len(c) for c in await store.read_chunks(file.id, 0, 10)] == [CHUNK_BYTES, CHUNK_BYTES, 768]
    assert await store.read_chunks(file.id, 2, 10) == [data[2 * CHUNK_BYTES :]]
    assert await _bytes_of(store, file.id) == data
    assert await store.stored_bytes("p") == len(data) and await store.stored_bytes("q") == 0
    assert await store.delete_file(file.id) is True
    assert await store.delete_file(file.id) is False
    assert await store.get_file(file.id) is None and await store.read_chunks(file.id, 0, 10) == []
    assert await store.stored_bytes("p") == 0


async def test_files_list_by_project_and_purpose_with_cursors(store: ResponseStore) -> None:
    for i in range(5):
        await store.add_file(_file(i, purpose="batch" if i == 2 else "user_data"), b"xxxx")
    await store.add_file(_file(9, project="other"), b"xxxx")
    await store.add_file(_file(8, expires_at=time.time() - 1), b"xxxx")  # expired: never listed

    async def ids(**kw: object) -> list[int]:
        return [int(f.id[5:], 16) for f in await store.list_files("p", **kw)]  # type: ignore[arg-type]

    assert await ids() == [4, 3, 2, 1, 0]
    assert await ids(descending=False, limit=2) == [0, 1]
    assert await ids(after=_file(3).id, limit=2) == [2, 1]
    assert await ids(after=_file(1).id, descending=False) == [2, 3, 4]
    assert await ids(purpose="user_data", after=_file(4).id) == [3, 1, 0]
    assert await ids(after=_file(9).id) == []  # another project's id is no cursor here
    assert await ids(after="file-" + "f" * 24) == []


async def test_an_uploads_parts_become_its_file_in_the_order_named(store: ResponseStore) -> None:
    now = time.time()
    upload = StoredUpload(
        "upload_" + "1" * 24, "p", "u.bin", "assistants", "application/octet-stream", 0, now, now + 3600
    )
    await store.add_upload(upload)
    first, second = b"A" * (CHUNK_BYTES + 5), b"B" * 7
    assert await store.add_upload_part(upload.id, "part_" + "1" * 24, now, first)
    assert await store.add_upload_part(upload.id, "part_" + "2" * 24, now + 1, second)
    assert await store.add_upload_part(upload.id, "part_" + "3" * 24, now + 2, b"dropped")
    assert await store.upload_parts(upload.id) == {
        "part_" + "1" * 24: len(first),
        "part_" + "2" * 24: 7,
        "part_" + "3" * 24: 7,
    }
    assert await store.stored_bytes("p") == len(first) + 14
    file = StoredFile("file-" + "b" * 24, "p", "u.bin", "assistants", len(first) + 7, now)
    assert await store.complete_upload(upload.id, ["part_" + "2" * 24, "part_" + "1" * 24], file)
    assert await _bytes_of(store, file.id) == second + first  # the order named, not the order sent
    assert await store.read_chunks("part_" + "3" * 24, 0, 10) == []  # the part not named is gone
    assert (await store.get_upload(upload.id)).status == "completed"  # type: ignore[union-attr]
    assert (await store.get_upload(upload.id)).file_id == file.id  # type: ignore[union-attr]
    assert await store.stored_bytes("p") == file.bytes
    assert not await store.complete_upload(upload.id, [], file)  # once only
    assert not await store.add_upload_part(upload.id, "part_" + "4" * 24, now, b"late")


async def test_cancel_and_the_sweep_drop_parts_and_expired_files(store: ResponseStore) -> None:
    now = time.time()
    mk = lambda n: StoredUpload(f"upload_{n:024x}", "p", "u", "batch", "text/plain", 9, now, now + 3600)  # noqa: E731
    await store.add_upload(mk(1))
    await store.add_upload(mk(2))
    await store.add_upload_part(mk(1).id, "part_" + "5" * 24, now, b"12345")
    await store.add_upload_part(mk(2).id, "part_" + "6" * 24, now, b"6789")
    assert await store.cancel_upload(mk(1).id) and not await store.cancel_upload(mk(1).id)
    assert (await store.get_upload(mk(1).id)).status == "cancelled"  # type: ignore[union-attr]
    assert await store.read_chunks("part_" + "5" * 24, 0, 1) == []
    await store.add_file(_file(1, expires_at=now + 60), b"soon")
    await store.add_file(_file(2), b"kept")
    await store.sweep_files(now + 30)
    assert await store.get_file(_file(1).id) is not None
    await store.sweep_files(now + 3601)  # past the file's expiry and the pending upload's
    assert await store.get_file(_file(1).id) is None and await store.read_chunks(_file(1).id, 0, 1) == []
    assert await store.get_file(_file(2).id) is not None
    assert (await store.get_upload(mk(2).id)).status == "expired"  # type: ignore[union-attr]
    assert (
        await store.upload_parts(mk(2).id) == {} and await store.read_chunks("part_" + "6" * 24, 0, 1) == []
    )
    assert await store.stored_bytes("p") == 4
    await store.sweep_files(now + 3600 + 86401)  # a day past their expiry, the upload rows go too
    assert await store.get_upload(mk(2).id) is None

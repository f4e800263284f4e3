"""The SQLite store's files are private: a folder it creates 0700, the database and its -wal and -shm files 0600,
whatever the umask lets other users read."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.test_responses import record
from vllm_responses.store.migrations import upgrade
from vllm_responses.store.sqlite import SQLiteStore


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o022)  # the usual one: files 0644, folders 0755 unless made private
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_store_creates_private_files(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "state" / "responses.db"
    store = SQLiteStore(db)
    await store.open()
    try:
        await store.save(record(1))
        assert mode(db.parent) == 0o700
        assert mode(db) == 0o600
        for extra in ("-wal", "-shm"):
            assert mode(Path(f"{db}{extra}")) == 0o600
    finally:
        await store.aclose()


async def test_db_upgrade_creates_a_private_file(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "other" / "responses.db"
    await upgrade(str(db))
    assert mode(db.parent) == 0o700 and mode(db) == 0o600


async def test_an_existing_folder_is_left_as_it_is(tmp_path: Path, open_umask: None) -> None:
    tmp_path.chmod(0o755)
    store = SQLiteStore(tmp_path / "responses.db")
    await store.open()
    await store.aclose()
    assert mode(tmp_path) == 0o755 and mode(tmp_path / "responses.db") == 0o600

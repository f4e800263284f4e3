"""Schema migrations on SQLite and a real Postgres: a fresh database, a SQLite file made before migrations
existed upgraded in place, a database newer than the code refused, two Postgres upgrades at once, and
`vllm-responses db upgrade`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from tests.store.test_responses import record
from tests.support.fakes import FakeEngine
from tests.support.serving import LiveServer
from vllm_responses.cli import main
from vllm_responses.config import Config
from vllm_responses.store.migrations import (
    LATEST,
    POSTGRES_MIGRATIONS,
    SQLITE_MIGRATIONS,
    SchemaTooNew,
    is_postgres_url,
    upgrade,
)
from vllm_responses.store.open import store_for

# The schema today's (pre-migration) code created with `executescript`: migration 1, with no schema_version.
PRE_MIGRATION_SCHEMA = SQLITE_MIGRATIONS[0]


async def versions(db: str) -> list[int]:
    if is_postgres_url(db):
        conn = await asyncpg.connect(db)
        try:
            return [r[0] for r in await conn.fetch("SELECT version FROM schema_version ORDER BY version")]
        finally:
            await conn.close()
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]


async def indexes(db: str) -> set[str]:
    if is_postgres_url(db):
        conn = await asyncpg.connect(db)
        try:
            return {r[0] for r in await conn.fetch("SELECT indexname FROM pg_indexes")}
        finally:
            await conn.close()
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


async def test_a_fresh_database_is_migrated_to_the_latest_version(durable_db: str) -> None:
    assert LATEST >= 2
    store = store_for(durable_db)
    await store.open()
    await store.aclose()
    assert await versions(durable_db) == list(range(1, LATEST + 1))
    assert {"responses_created", "responses_unfinished", "conversation_items_order"} <= await indexes(
        durable_db
    )
    again = store_for(durable_db)  # a second open applies nothing
    await again.open()
    await again.aclose()
    assert await versions(durable_db) == list(range(1, LATEST + 1))


async def test_a_pre_migration_sqlite_file_is_upgraded_in_place(tmp_path: Path) -> None:
    db = str(tmp_path / "old.db")
    response = {"id": "resp_old", "status": "completed", "output": []}
    item = {"id": "msg_old", "type": "message", "role": "user", "content": "kept"}
    with sqlite3.connect(db) as conn:  # as today's code left it: its tables and rows, no schema_version
        conn.executescript(PRE_MIGRATION_SCHEMA)
        conn.execute(
            "INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                "resp_old",
                time.time(),
                "completed",
                0,
                json.dumps(response),
                json.dumps([item]),
                json.dumps([item]),
            ),
        )
        conn.execute("INSERT INTO items VALUES (?, ?, ?)", ("msg_old", "resp_old", json.dumps(item)))
        conn.execute(
            "INSERT INTO conversations VALUES (?, ?, ?, ?)", ("conv_old", time.time(), time.time(), "{}")
        )
        conn.execute(
            "INSERT INTO conversation_items (conversation_id, id, item) VALUES (?, ?, ?)",
            ("conv_old", "msg_old", json.dumps(item)),
        )
    assert "responses_unfinished" not in await indexes(db)
    store = store_for(db)
    await store.open()
    got = await store.get("resp_old")
    assert got is not None and got.response == response and got.input_items == [item]
    assert await store.find_item("msg_old") == item
    assert await store.list_conversation_items("conv_old") == [item]
    await store.aclose()
    assert await versions(db) == list(range(1, LATEST + 1))
    assert "responses_unfinished" in await indexes(db)


async def _at_version_6(db: str, rows: list[tuple[str, str, str]]) -> None:
    """`db` migrated to version 6 (items keyed by id alone), holding a response per (project, response, item)."""
    responses = [
        (rid, time.time(), "completed", json.dumps({"id": rid}), project) for project, rid, _ in rows
    ]
    items = [(iid, rid, json.dumps({"id": iid, "type": "message", "n": rid})) for _, rid, iid in rows]
    if is_postgres_url(db):
        conn = await asyncpg.connect(db)
        try:
            await conn.execute(
                "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)"
            )
            for version, script in enumerate(POSTGRES_MIGRATIONS[:6], 1):
                await conn.execute(script)
                await conn.execute("INSERT INTO schema_version VALUES ($1, $2)", version, time.time())
            await conn.executemany(
                "INSERT INTO responses (id, created_at, status, include_outputs, response, input_items, history, project) "
                "VALUES ($1, $2, $3, false, $4, '[]', '[]', $5)",
                responses,
            )
            await conn.executemany("INSERT INTO items VALUES ($1, $2, $3)", items)
        finally:
            await conn.close()
        return
    with sqlite3.connect(db) as sconn:
        sconn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
        for version, script in enumerate(SQLITE_MIGRATIONS[:6], 1):
            sconn.executescript(script)
            sconn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))
        sconn.executemany(
            "INSERT INTO responses (id, created_at, status, include_outputs, response, input_items, history, project) "
            "VALUES (?, ?, ?, 0, ?, '[]', '[]', ?)",
            responses,
        )
        sconn.executemany("INSERT INTO items VALUES (?, ?, ?)", items)


async def test_migration_7_keeps_each_item_with_its_responses_project(durable_db: str) -> None:
    await _at_version_6(durable_db, [("proj_a", "resp_a", "msg_a"), ("proj_b", "resp_b", "msg_b")])
    store = store_for(durable_db)
    await store.open()
    assert await versions(durable_db) == list(range(1, LATEST + 1))
    assert (await store.find_item("msg_a", "proj_a"))["n"] == "resp_a"  # type: ignore[index]
    assert (await store.find_item("msg_b", "proj_b"))["n"] == "resp_b"  # type: ignore[index]
    assert await store.find_item("msg_a", "proj_b") is None
    await store.save(dataclasses.replace(record(9), project="proj_b"))  # B's write under A's id: a row of B's
    await store.save(
        dataclasses.replace(
            record(8), input_items=[{"id": "msg_a"}], history=[{"id": "msg_a"}], project="proj_b"
        )
    )
    assert (await store.find_item("msg_a", "proj_a"))["n"] == "resp_a"  # type: ignore[index]
    await store.aclose()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # uvicorn's exit 3
async def test_a_database_newer_than_the_code_is_refused(
    durable_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_for(durable_db)
    await store.open()
    await store.aclose()
    if is_postgres_url(durable_db):
        conn = await asyncpg.connect(durable_db)
        await conn.execute("INSERT INTO schema_version VALUES ($1, $2)", LATEST + 1, time.time())
        await conn.close()
    else:
        with sqlite3.connect(durable_db) as sconn:
            sconn.execute("INSERT INTO schema_version VALUES (?, ?)", (LATEST + 1, time.time()))
    newer = store_for(durable_db)
    with pytest.raises(SchemaTooNew, match=f"schema version {LATEST + 1}.*up to {LATEST} only"):
        await newer.open()
    await newer.aclose()  # nothing left open
    server = LiveServer(Config(), FakeEngine(), None, db=durable_db)
    with pytest.raises(RuntimeError, match="died during start-up"):  # the server does not start on it
        await asyncio.to_thread(server.start)
    assert await asyncio.to_thread(main, ["db", "upgrade", "--db", durable_db]) == 2
    assert f"schema version {LATEST + 1}" in capsys.readouterr().err
    assert await versions(durable_db) == [*range(1, LATEST + 1), LATEST + 1]  # untouched


async def test_two_postgres_upgrades_at_once_apply_each_migration_once(pg_url: str) -> None:
    results = await asyncio.gather(*(upgrade(pg_url) for _ in range(4)))
    assert sorted(results) == [(0, LATEST)] + [(LATEST, LATEST)] * 3  # one migrated, the others waited
    assert await versions(pg_url) == list(range(1, LATEST + 1))
    stores = [store_for(pg_url) for _ in range(2)]  # two replicas opening at once
    await asyncio.gather(*(s.open() for s in stores))
    await stores[0].save(record(7))
    assert await stores[1].get("resp_7") is not None  # one database: what one writes, the other reads
    await asyncio.gather(*(s.aclose() for s in stores))


async def test_db_upgrade_command(durable_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await asyncio.to_thread(main, ["db", "upgrade", "--db", durable_db]) == 0
    assert f"schema version 0 -> {LATEST}" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["db", "upgrade", "--db", durable_db]) == 0
    assert f"schema version {LATEST}: up to date" in capsys.readouterr().out
    assert await versions(durable_db) == list(range(1, LATEST + 1))
    done = await asyncio.to_thread(  # the real command, its --db from the environment
        subprocess.run,
        [sys.executable, "-m", "vllm_responses", "db", "upgrade"],
        env={**os.environ, "VLLM_RESPONSES_DB": durable_db},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and f"schema version {LATEST}: up to date" in done.stdout, done
    unreachable = "postgresql://postgres@127.0.0.1:1/x"
    assert await asyncio.to_thread(main, ["db", "upgrade", "--db", unreachable]) == 2
    assert "db upgrade failed" in capsys.readouterr().err


def test_the_postgres_fixture_fails_without_the_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    import scripts.pg_cluster
    import tests.support.postgres

    monkeypatch.setattr(scripts.pg_cluster.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(scripts.pg_cluster.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="run scripts/setup.sh"):
        tests.support.postgres.start_cluster()

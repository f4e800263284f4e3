"""Sealed reasoning: AES-GCM under the server's key, authenticated (altered, foreign or unversioned blobs do not
open), and the key: from the operator, or generated once into a private file that a restart reads back."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from vllm_responses.store.sealing import KEY_FILE, ReasoningSeal, reasoning_seal


def test_a_sealed_text_opens_and_hides_its_text() -> None:
    seal = ReasoningSeal(bytes(range(32)))
    blob = seal.seal("The answer is 42 because 6 * 7.")
    assert "42" not in blob and "answer" not in base64.urlsafe_b64decode(blob).decode(errors="replace")
    assert seal.open(blob) == "The answer is 42 because 6 * 7."
    assert seal.seal("x") != seal.seal("x")  # a fresh nonce each time


@pytest.mark.parametrize("where", [0, 5, 20, -1])
def test_an_altered_blob_does_not_open(where: int) -> None:
    seal = ReasoningSeal(bytes(32))
    raw = bytearray(base64.urlsafe_b64decode(seal.seal("plan")))
    raw[where] ^= 1
    with pytest.raises(ValueError):
        seal.open(base64.urlsafe_b64encode(bytes(raw)).decode())


def test_a_foreign_or_malformed_blob_does_not_open() -> None:
    ours, theirs = ReasoningSeal(bytes(32)), ReasoningSeal(bytes([1] * 32))
    with pytest.raises(ValueError):
        ours.open(theirs.seal("plan"))
    old = "vr1:" + base64.urlsafe_b64encode(b"plan").decode()  # the unauthenticated form of earlier versions
    for blob in (old, "", "not base64!", base64.urlsafe_b64encode(b"\x01short").decode()):
        with pytest.raises(ValueError):
            ours.open(blob)


def test_an_operator_key_is_shared_by_replicas(tmp_path: Path) -> None:
    a = reasoning_seal("a shared passphrase", str(tmp_path / "a.db"))
    b = reasoning_seal("a shared passphrase", str(tmp_path / "b.db"))
    assert b.open(a.seal("plan")) == "plan"
    with pytest.raises(ValueError):
        reasoning_seal("another", str(tmp_path / "a.db")).open(a.seal("plan"))
    assert not (tmp_path / KEY_FILE).exists()


def test_a_generated_key_is_kept_privately_and_read_back(tmp_path: Path) -> None:
    db = str(tmp_path / "data" / "responses.db")
    first = reasoning_seal(None, db)
    assert not (tmp_path / "data" / KEY_FILE).exists()  # made on first use only
    blob = first.seal("plan")
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert reasoning_seal(None, db).open(blob) == "plan"  # a restart opens older blobs
    memory = reasoning_seal(None, ":memory:")
    with pytest.raises(ValueError):
        memory.open(blob)


def test_an_empty_key_file_is_filled_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    db = str(tmp_path / "responses.db")
    (tmp_path / KEY_FILE).write_text("")  # left by an interrupted start
    assert reasoning_seal(None, db).open(reasoning_seal(None, db).seal("plan")) == "plan"
    assert len((tmp_path / KEY_FILE).read_text().strip()) == 64
    (tmp_path / KEY_FILE).write_text("not hex")
    with pytest.raises(ValueError, match=KEY_FILE):
        reasoning_seal(None, db).seal("plan")
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary file left behind

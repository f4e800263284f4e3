"""Sealed reasoning: AES-GCM under the server's key, authenticated (altered, foreign, unversioned or another
project's blobs do not open; another key's is named by its key id), and the key: from the operator, or
generated once into a private file that a restart reads back, refused when another user could read or own it."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from tests.support.fakes import FakeEngine
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.store import sealing
from vllm_responses.store.sealing import KEY_FILE, ReasoningKeyError, ReasoningSeal, key_id, reasoning_seal

P = "proj_a"


def test_a_sealed_text_opens_and_hides_its_text() -> None:
    seal = ReasoningSeal(bytes(range(32)))
    text = "The answer is 42 because 6 * 7."
    blob = seal.seal(text, P)
    raw = base64.urlsafe_b64decode(blob)
    # Whole phrases, not two characters: a random ciphertext holds "42" by chance about once in a hundred.
    for hidden in ("The answer", "because 6"):
        assert hidden not in blob and hidden.encode() not in raw
        assert base64.urlsafe_b64encode(hidden.encode()).decode()[:8] not in blob
    assert seal.open(blob, P) == text
    assert seal.seal("x", P) != seal.seal("x", P)  # a fresh nonce each time


@pytest.mark.parametrize("where", [0, 5, 20, -1])
def test_an_altered_blob_does_not_open(where: int) -> None:
    seal = ReasoningSeal(bytes(32))
    raw = bytearray(base64.urlsafe_b64decode(seal.seal("plan", P)))
    raw[where] ^= 1
    with pytest.raises(ValueError):
        seal.open(base64.urlsafe_b64encode(bytes(raw)).decode(), P)


def test_a_foreign_or_malformed_blob_does_not_open() -> None:
    ours, theirs = ReasoningSeal(bytes(32)), ReasoningSeal(bytes([1] * 32))
    with pytest.raises(ValueError):
        ours.open(theirs.seal("plan", P), P)
    old = "vr1:" + base64.urlsafe_b64encode(b"plan").decode()  # the unauthenticated form of earlier versions
    for blob in (old, "", "not base64!", base64.urlsafe_b64encode(b"\x01short").decode()):
        with pytest.raises(ValueError):
            ours.open(blob, P)


def test_an_operator_key_is_shared_by_replicas(tmp_path: Path) -> None:
    a = reasoning_seal("a shared passphrase", str(tmp_path / "a.db"))
    b = reasoning_seal("a shared passphrase", str(tmp_path / "b.db"))
    assert b.open(a.seal("plan", P), P) == "plan"
    with pytest.raises(ValueError):
        reasoning_seal("another", str(tmp_path / "a.db")).open(a.seal("plan", P), P)
    assert not (tmp_path / KEY_FILE).exists()


def test_a_generated_key_is_kept_privately_and_read_back(tmp_path: Path) -> None:
    db = str(tmp_path / "data" / "responses.db")
    first = reasoning_seal(None, db)
    assert not (tmp_path / "data" / KEY_FILE).exists()  # made on first use only
    blob = first.seal("plan", P)
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert reasoning_seal(None, db).open(blob, P) == "plan"  # a restart opens older blobs
    memory = reasoning_seal(None, ":memory:")
    with pytest.raises(ValueError):
        memory.open(blob, P)


def test_an_empty_key_file_is_filled_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    db = str(tmp_path / "responses.db")
    (tmp_path / KEY_FILE).write_text("")  # left by an interrupted start
    (tmp_path / KEY_FILE).chmod(0o600)
    assert reasoning_seal(None, db).open(reasoning_seal(None, db).seal("plan", P), P) == "plan"
    assert len((tmp_path / KEY_FILE).read_text().strip()) == 64
    (tmp_path / KEY_FILE).write_text("not hex")
    with pytest.raises(ReasoningKeyError, match=KEY_FILE):  # found when the server starts, not at a request
        reasoning_seal(None, db)
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary file left behind


def test_a_blob_opens_for_its_project_only_and_names_its_key() -> None:
    seal = ReasoningSeal(bytes(32))
    blob = seal.seal("A's plan", "proj_a")
    assert seal.open(blob, "proj_a") == "A's plan"
    with pytest.raises(ValueError, match="another project"):
        seal.open(blob, "proj_b")
    with pytest.raises(ValueError, match="another project"):
        seal.open(blob, "proj_a\x00")  # the project is bound whole, not as a prefix
    rotated = ReasoningSeal(bytes([9] * 32))
    with pytest.raises(ValueError, match=f"another key \\(key id {key_id(bytes(32)).hex()}"):
        rotated.open(blob, "proj_a")  # a key change is told apart from an altered blob
    assert base64.urlsafe_b64decode(blob)[1:9] == key_id(bytes(32))


def _kept(tmp_path: Path, mode: int = 0o600) -> str:
    """A SQLite path whose folder holds a key file of `mode` (64 hex digits)."""
    path = tmp_path / KEY_FILE
    path.write_text("ab" * 32 + "\n")
    path.chmod(mode)
    return str(tmp_path / "responses.db")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602])
def test_a_key_file_open_to_other_users_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ReasoningKeyError, match=f"mode {mode:04o}.*refused"):
        reasoning_seal(None, _kept(tmp_path, mode))
    assert reasoning_seal(None, _kept(tmp_path, 0o600)).open(
        ReasoningSeal(bytes([0xAB] * 32)).seal("x", P), P
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_key_file_of_another_user_is_refused(tmp_path: Path) -> None:
    db = _kept(tmp_path)
    os.chown(tmp_path / KEY_FILE, 4321, 4321)
    with pytest.raises(ReasoningKeyError, match="user id 4321"):
        reasoning_seal(None, db)


def test_a_key_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _kept(elsewhere)
    (tmp_path / KEY_FILE).symlink_to(elsewhere / KEY_FILE)  # a link to a good key: still refused
    with pytest.raises(ReasoningKeyError, match="refused"):
        reasoning_seal(None, str(tmp_path / "responses.db"))
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / KEY_FILE).symlink_to(tmp_path / "nowhere")  # not followed to create a file there
    with pytest.raises(ReasoningKeyError, match="refused"):
        reasoning_seal(None, str(dangling / "responses.db"))
    assert not (tmp_path / "nowhere").exists()


def test_a_new_key_is_written_exclusively_never_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "target"
    target.write_text("untouched")
    planted = tmp_path / ".reasoning.key.planted"
    planted.symlink_to(target)  # a link waiting at the temporary file's name
    monkeypatch.setattr(sealing, "_fresh_name", lambda path: planted)
    with pytest.raises(FileExistsError):
        reasoning_seal(None, str(tmp_path / "responses.db")).seal("plan", P)
    assert target.read_text() == "untouched" and not (tmp_path / KEY_FILE).exists()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # uvicorn's exit 3
def test_a_server_does_not_start_on_a_key_file_others_may_read(tmp_path: Path) -> None:
    db = _kept(tmp_path, 0o644)
    server = LiveServer(Config(db=db), FakeEngine(), None, db=db)
    with pytest.raises(RuntimeError, match="died during start-up"):
        server.start()
    (tmp_path / KEY_FILE).chmod(0o600)
    server = LiveServer(Config(db=db), FakeEngine(), None, db=db)
    server.start().stop()

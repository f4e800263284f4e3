"""The keys file hardened: refused at start unless it is the server user's alone (owner, mode), `key`s shorter
than `MIN_KEY_CHARS` refused (`sha256` entries still taken), and read again on SIGHUP (`KeyRing.reload`) with
a bad new file keeping the keys in use. Real servers: in this process, and as processes."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer, free_port
from vllm_responses import cli
from vllm_responses.api.auth import MIN_KEY_CHARS, KeyRing, KeysFileError
from vllm_responses.config import Config

ROOT = Path(__file__).parents[2]
OLD = "sk-old-0123456789abcdef0123456789abcdef"
NEW = "sk-new-0123456789abcdef0123456789abcdef"
HASHED = "sk-hashed-0123456789abcdef0123456789abcdef"


def _status(base_url: str, key: str) -> int:
    return httpx.get(
        base_url + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30
    ).status_code


def _serve(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`python -m vllm_responses serve ...` with a model path that does not exist: were the keys file not
    refused, it would go on to load it (and fail otherwise, later)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_RESPONSES_")}
    command = [sys.executable, "-m", "vllm_responses", "serve", "--model", "/nonexistent/model", *argv]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_keys_file_others_may_read_or_change_is_refused(tmp_path: Path, mode: int) -> None:
    path = Path(write_keys_file(tmp_path / "keys.json", [{"key": OLD, "project": "p"}]))
    path.chmod(mode)
    with pytest.raises(KeysFileError, match=f"mode {mode:04o} lets other users read or change it"):
        KeyRing.from_config(Config(api_keys_file=str(path)))
    path.chmod(0o400)  # the owner's alone, read-only: taken
    assert KeyRing.from_config(Config(api_keys_file=str(path))).resolve(f"Bearer {OLD}") is not None


def test_serve_refuses_a_readable_keys_file_before_loading_the_model(tmp_path: Path) -> None:
    path = Path(write_keys_file(tmp_path / "keys.json", [{"key": OLD, "project": "p"}]))
    path.chmod(0o644)
    done = _serve(["--api-keys-file", str(path), "--db", ":memory:"])
    assert done.returncode == 2, done.stderr
    assert f"--api-keys-file {path}: mode 0644 lets other users read or change it" in done.stderr
    assert "chmod 600" in done.stderr
    assert "loading model" not in done.stderr + done.stdout  # nothing was loaded


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the file to another user needs root")
def test_a_keys_file_of_another_user_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(write_keys_file(tmp_path / "keys.json", [{"key": OLD, "project": "p"}]))
    os.chown(path, 65534, -1)
    assert cli.main(["serve", "--api-keys-file", str(path)]) == 2
    assert "owned by user id 65534, not by the user this server runs as (0)" in capsys.readouterr().err


def test_short_keys_are_refused_and_digests_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    short = OLD[: MIN_KEY_CHARS - 1]
    path = write_keys_file(tmp_path / "keys.json", [{"key": short, "project": "p"}])
    with pytest.raises(KeysFileError, match=f"'key' must be a string of at least {MIN_KEY_CHARS} characters"):
        KeyRing.from_config(Config(api_keys_file=path))
    assert cli.main(["serve", "--api-keys-file", path]) == 2
    assert f"at least {MIN_KEY_CHARS} characters" in capsys.readouterr().err
    digest = hashlib.sha256(HASHED.encode()).hexdigest()
    path = write_keys_file(
        tmp_path / "keys.json", [{"key": OLD, "project": "p"}, {"sha256": digest, "project": "q"}]
    )
    ring = KeyRing.from_config(Config(api_keys_file=path))
    assert ring.resolve(f"Bearer {HASHED}") is not None and ring.resolve(f"Bearer {OLD}") is not None


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    keys = write_keys_file(tmp_path / "keys.json", [{"key": OLD, "project": "p"}])
    server = LiveServer(Config(api_keys_file=keys), FakeEngine(), None).start()
    yield server
    server.stop()


def test_reload_takes_the_new_keys_and_keeps_the_old_on_a_bad_file(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    path = Path(str(live.config.api_keys_file))
    keys: KeyRing = live.app.state.keys
    assert (_status(live.base_url, OLD), _status(live.base_url, NEW)) == (200, 401)
    write_keys_file(path, [{"key": NEW, "project": "p"}])
    assert keys.reload()
    assert (_status(live.base_url, OLD), _status(live.base_url, NEW)) == (401, 200)  # taken at once
    write_keys_file(path, [{"key": OLD, "project": "p"}])
    path.chmod(0o644)  # a bad new file: the keys in use stay, the log says why
    with caplog.at_level(logging.ERROR, logger="vllm_responses.api.auth"):
        assert not keys.reload()
    assert "keys not reloaded, the keys read before are kept" in caplog.text and "chmod 600" in caplog.text
    assert (_status(live.base_url, OLD), _status(live.base_url, NEW)) == (401, 200)
    path.write_text("{not json")
    path.chmod(0o600)
    assert not keys.reload()
    assert _status(live.base_url, NEW) == 200


def test_reload_takes_the_projects_new_bounds(live: LiveServer) -> None:
    """A project's bounds in the keys file (here `max_stored_bytes`) follow a reload as its keys do."""
    path = Path(str(live.config.api_keys_file))
    live.engine.reset()
    sdk = openai.OpenAI(base_url=live.base_url + "/v1", api_key=OLD, max_retries=0, timeout=30)
    sdk.responses.create(model="fake-model", input="x" * 2000)  # no bound yet
    write_keys_file(path, [{"key": OLD, "project": "p", "max_stored_bytes": 1000}])
    assert live.app.state.keys.reload()
    with pytest.raises(openai.BadRequestError) as too_big:  # more than the new bound alone
        sdk.responses.create(model="fake-model", input="x" * 2000)
    assert too_big.value.code == "storage_quota_exceeded"
    write_keys_file(path, [{"key": OLD, "project": "p"}])
    assert live.app.state.keys.reload()
    sdk.responses.create(model="fake-model", input="x" * 2000)  # the bound is gone again


# `server.run` with a scripted engine in place of vLLM: the real signal handling of the real command's server
_RUN = """
import sys
from contextlib import asynccontextmanager
from tests.support.fakes import FakeEngine
from vllm_responses import server
from vllm_responses.config import Config
from vllm_responses.store.memory import MemoryStore

@asynccontextmanager
async def fake(config):
    store = MemoryStore()
    await store.open()
    try:
        yield FakeEngine(), None, store
    finally:
        await store.aclose()

server.open_components = fake
config = Config(api_keys_file=sys.argv[1], port=int(sys.argv[2]), code_interpreter=False, db=":memory:")
sys.exit(server.run(config))
"""


def test_sighup_reloads_the_keys_of_a_running_server(tmp_path: Path) -> None:
    path = write_keys_file(tmp_path / "keys.json", [{"key": OLD, "project": "p"}])
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_RESPONSES_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUN, path, str(port)], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # up to a minute to start
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(base_url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert (_status(base_url, OLD), _status(base_url, NEW)) == (200, 401)
        write_keys_file(Path(path), [{"key": NEW, "project": "p"}])
        proc.send_signal(signal.SIGHUP)
        for _ in range(300):  # the signal is handled on the server's loop: wait for it to be
            if _status(base_url, NEW) == 200:
                break
            time.sleep(0.1)
        assert (_status(base_url, OLD), _status(base_url, NEW)) == (401, 200)
        assert proc.poll() is None  # SIGHUP did not end it
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "keys reloaded from" in err

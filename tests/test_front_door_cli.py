"""Closed by default: `serve` refuses, before anything loads, a --host beyond loopback with no API key and an
empty key; the keys never show in --help."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.serving import free_port
from vllm_responses import cli
from vllm_responses.config import Config

ROOT = Path(__file__).parents[1]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_RESPONSES_")}
    return {**env, **extra}


def _serve(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m vllm_responses serve ...` with a model path that does not exist: were it not refused, it
    would go on to load it (and fail otherwise, later)."""
    command = [sys.executable, "-m", "vllm_responses", "serve", "--model", "/nonexistent/model", *argv]
    return subprocess.run(
        command, cwd=ROOT, env=_clean_env(**env), capture_output=True, text=True, timeout=300
    )


def test_serving_beyond_loopback_without_a_key_exits_at_once() -> None:
    port = free_port()
    started = time.monotonic()
    done = _serve(["--host", "0.0.0.0", "--port", str(port), "--db", ":memory:"])
    assert done.returncode == 2, done.stderr
    assert "--host 0.0.0.0 listens beyond this machine and no API key is set" in done.stderr
    assert "--api-key" in done.stderr and "--allow-unauthenticated" in done.stderr
    assert "loading model" not in done.stderr + done.stdout  # nothing was loaded
    assert time.monotonic() - started < 240


def test_an_empty_api_key_in_the_environment_exits_at_once() -> None:
    done = _serve(["--db", ":memory:"], VLLM_RESPONSES_API_KEY="")
    assert done.returncode == 2, done.stderr
    assert "--api-key is empty (is VLLM_RESPONSES_API_KEY set to ''?)" in done.stderr


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[Config]:
    """The configs `serve` would run (the server itself is not started)."""
    for name in [n for n in os.environ if n.startswith("VLLM_RESPONSES_")]:
        monkeypatch.delenv(name)
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    return seen


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.20", "myhost.example"])
def test_a_host_beyond_loopback_needs_a_key_or_the_switch(
    runs: list[Config], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    model = ["serve", "--model", "/nonexistent/model", "--host", host]
    assert cli.main(model) == 2 and runs == []
    assert "no API key is set" in capsys.readouterr().err
    assert cli.main([*model, "--api-key", "k"]) == 0
    assert cli.main([*model, "--allow-unauthenticated"]) == 0
    monkeypatch.setenv("VLLM_RESPONSES_ALLOW_UNAUTHENTICATED", "1")
    assert cli.main(model) == 0
    assert [c.host for c in runs] == [host] * 3 and runs[1].allow_unauthenticated


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_key(runs: list[Config], host: str) -> None:
    assert cli.main(["serve", "--model", "/nonexistent/model", "--host", host]) == 0
    assert not runs[0].auth_configured


@pytest.mark.parametrize("flag", ["--api-key", "--operator-key"])
def test_an_empty_key_is_an_error(
    runs: list[Config], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    assert cli.main(["serve", "--model", "/nonexistent/model", flag, ""]) == 2
    assert f"{flag} is empty" in capsys.readouterr().err
    monkeypatch.setenv("VLLM_RESPONSES_" + flag[2:].replace("-", "_").upper(), "")
    assert cli.main(["serve", "--model", "/nonexistent/model"]) == 2
    assert runs == []


def test_the_keys_from_the_environment_never_show_in_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_RESPONSES_API_KEY", "env-api-s3cret")
    monkeypatch.setenv("VLLM_RESPONSES_OPERATOR_KEY", "env-ops-s3cret")
    with pytest.raises(SystemExit):
        cli.build_parser(with_engine_args=False).parse_args(["serve", "--help"])
    out = capsys.readouterr().out
    assert "--operator-key" in out and "env-api-s3cret" not in out and "env-ops-s3cret" not in out

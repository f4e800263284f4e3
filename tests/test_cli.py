"""CLI parsing: our flags, env vars, and vLLM's own engine flags, checked on the Config (no server started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_responses import cli
from vllm_responses.config import Config


def test_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    monkeypatch.setenv("VR_CODE_INTERPRETER_WORKERS", "3")
    monkeypatch.setenv("VLLM_RESPONSES_API_KEY", "from-env")
    model = tmp_path / "m"
    code = cli.main([
        "serve", "--model", str(model), "--port", "9123", "--db", ":memory:",
        "--code-interpreter-timeout", "5", "--code-interpreter-allow-net", "example.org,pypi.org",
        "--max-model-len", "1024", "--dtype", "float32", "--max-turns", "4",
    ])
    assert code == 0
    (config,) = seen
    assert config.port == 9123 and config.db == ":memory:" and config.api_key == "from-env"
    assert config.code_interpreter_workers == 3 and config.code_interpreter_timeout == 5.0
    assert config.code_interpreter_allow_net == ("example.org", "pypi.org")
    assert config.max_turns == 4 and config.served_model_names == (str(model),)
    args = config.engine_args["args"]
    assert args.model == str(model) and args.max_model_len == 1024 and args.dtype == "float32"


def test_default_model_without_setup_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VR_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr("vllm_responses.server.run", lambda config: 0)
    assert cli.main(["serve"]) == 2
    assert "setup" in capsys.readouterr().err

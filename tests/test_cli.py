"""CLI parsing (no server started): our flags, their env vars and defaults, and vLLM's own engine flags."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from pathlib import Path

import pytest

from vllm_responses import cli
from vllm_responses.config import SETTINGS, Config


def test_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    monkeypatch.setenv("VR_CODE_INTERPRETER_WORKERS", "3")
    monkeypatch.setenv("VLLM_RESPONSES_API_KEY", "from-env")
    model = tmp_path / "m"
    code = cli.main(
        [
            "serve",
            "--model",
            str(model),
            "--port",
            "9123",
            "--db",
            ":memory:",
            "--code-interpreter-timeout",
            "5",
            "--code-interpreter-allow-net",
            "example.org,pypi.org",
            "--max-model-len",
            "1024",
            "--dtype",
            "float32",
            "--max-turns",
            "4",
        ]
    )
    assert code == 0
    (config,) = seen
    assert config.port == 9123 and config.db == ":memory:" and config.api_key == "from-env"
    assert config.code_interpreter_workers == 3 and config.code_interpreter_timeout == 5.0
    assert config.code_interpreter_allow_net == ("example.org", "pypi.org")
    assert config.max_turns == 4 and config.served_model_names == (str(model),)
    args = config.engine_args["args"]
    assert args.model == str(model) and args.max_model_len == 1024 and args.dtype == "float32"


def test_default_model_without_setup_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VR_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr("vllm_responses.server.run", lambda config: 0)
    assert cli.main(["serve"]) == 2
    assert "setup" in capsys.readouterr().err


def _serve_args(argv: list[str] | None = None) -> argparse.Namespace:
    return cli.build_parser(with_engine_args=False).parse_args(["serve", *(argv or [])])


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def test_defaults_are_the_configs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith(("VLLM_RESPONSES_", "VR_CODE_INTERPRETER"))]:
        monkeypatch.delenv(name)
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    assert cli.main(["serve", "--model", str(tmp_path / "m")]) == 0
    (config,) = seen
    from_engine = {"model", "served_model_names", "engine_args"}
    for field in dataclasses.fields(Config):
        if field.name not in from_engine:
            assert getattr(config, field.name) == getattr(Config(), field.name), field.name


# one value per flag of ours, as its environment variable gives it, and what the parser makes of it
ENV_VALUES = {
    "--host": ("0.0.0.0", "0.0.0.0"),
    "--port": ("9000", 9000),
    "--db": (":memory:", ":memory:"),
    "--api-key": ("k", "k"),
    "--api-keys-file": ("/etc/keys.json", "/etc/keys.json"),
    "--reasoning-key": ("shared secret", "shared secret"),
    "--rate-limit-rpm": ("60", 60),
    "--rate-limit-tpm": ("1000", 1000),
    "--auth-failures-per-minute": ("5", 5),
    "--project-max-containers": ("3", 3),
    "--project-max-sandbox-memory-mb": ("2048", 2048),
    "--project-max-stored-bytes": ("1000000", 1000000),
    "--code-interpreter-workers": ("5", 5),
    "--code-interpreter-timeout": ("2.5", 2.5),
    "--code-interpreter-allow-net": ("a.org,b.org", "a.org,b.org"),
    "--code-interpreter-idle-expiry": ("60", 60.0),
    "--code-interpreter-max-workers": ("6", 6),
    "--code-interpreter-max-spares": ("3", 3),
    "--code-interpreter-memory-budget": ("8g", "8g"),
    "--code-interpreter-budget-counts": ("caps", "caps"),
    "--code-interpreter-worker-reserve": ("300m", "300m"),
    "--code-interpreter-queue-timeout": ("2.5", 2.5),
    "--code-interpreter-user": ("", ""),
    "--code-interpreter-isolation": ("none", "none"),
    "--max-turns": ("3", 3),
    "--concise-summary-over": ("200", 200),
    "--tool-call-parser": ("pythonic", "pythonic"),
    "--log-level": ("debug", "debug"),
    "--no-code-interpreter": ("1", True),
    "--log-format": ("json", "json"),
    "--sse-keepalive": ("0.5", 0.5),
    "--shutdown-grace": ("5", 5.0),
    "--max-request-bytes": ("1048576", 1048576),
    "--max-upload-bytes": ("2097152", 2097152),
    "--max-file-bytes": ("1048576", 1048576),
    "--max-concurrent-responses": ("4", 4),
    "--max-queued-responses": ("0", 0),
    "--max-grammar-bytes": ("4096", 4096),
    "--max-image-bytes": ("1024", 1024),
    "--max-images": ("3", 3),
    "--max-image-pixels": ("4096", 4096),
    "--max-images-total-bytes": ("65536", 65536),
    "--grammar-compile-timeout": ("2.5", 2.5),
    "--max-deferred-tools": ("100", 100),
    "--max-websockets": ("8", 8),
    "--max-websockets-per-key": ("2", 2),
    "--mcp-timeout": ("2.5", 2.5),
    "--web-search-url": ("http://127.0.0.1:8888/search", "http://127.0.0.1:8888/search"),
    "--web-search-timeout": ("4", 4.0),
    "--embedding-model": ("none", "none"),
    "--embedding-url": ("http://10.0.0.5:8001/v1", "http://10.0.0.5:8001/v1"),
    "--embedding-api-key": ("sk-remote", "sk-remote"),
    "--embedding-timeout": ("5", 5.0),
    "--max-concurrent-embeddings": ("8", 8),
    "--web-search-page-allow-private-networks": ("1", True),
    "--mcp-allowed-urls": ("http://a:1/mcp,*", "http://a:1/mcp,*"),
    "--mcp-allow-private-networks": ("1", True),
    "--input-file-max-bytes": ("2048", 2048),
    "--max-input-files": ("5", 5),
    "--input-files-max-total-bytes": ("4096", 4096),
    "--input-file-max-pages": ("5", 5),
    "--input-file-max-chars": ("900", 900),
    "--input-file-allowed-urls": ("https://files.example.com/,*", "https://files.example.com/,*"),
    "--input-file-allow-private-networks": ("1", True),
    "--input-image-allowed-urls": ("https://img.example.com/,*", "https://img.example.com/,*"),
    "--input-image-allow-private-networks": ("1", True),
    "--input-file-url-timeout": ("3", 3.0),
    "--input-file-max-request-pages": ("50", 50),
    "--input-file-max-content-bytes": ("1048576", 1048576),
    "--input-file-extract-workers": ("3", 3),
    "--input-file-extract-cpu": ("2.5", 2.5),
    "--input-file-extract-timeout": ("4", 4.0),
    "--input-file-extract-memory": ("0", 0),
    "--code-interpreter-url": ("http://sandbox:8765", "http://sandbox:8765"),
    "--code-interpreter-token": ("t", "t"),
    "--db-pool-size": ("3", 3),
    "--replica-id": ("pod-1", "pod-1"),
    "--replica-heartbeat": ("0.5", 0.5),
    "--replica-lease": ("10", 10.0),
    "--restream-poll-interval": ("0.5", 0.5),
    "--allow-unauthenticated": ("1", True),
    "--allowed-hosts": ("api.example.com,10.0.0.5:8000", "api.example.com,10.0.0.5:8000"),
    "--allowed-origins": ("https://app.example.com", "https://app.example.com"),
    "--operator-key": ("op", "op"),
}


@pytest.mark.parametrize("flag", sorted(ENV_VALUES))
def test_every_flag_of_ours_has_its_env_var(monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    text, value = ENV_VALUES[flag]
    monkeypatch.setenv("VLLM_RESPONSES_" + _dest(flag).upper(), text)
    assert getattr(_serve_args(), _dest(flag)) == value


def test_the_env_table_covers_every_flag_of_ours() -> None:
    assert set(vars(_serve_args())) - {"command"} == {_dest(flag) for flag in ENV_VALUES}


def test_code_interpreter_workers_env_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VR_CODE_INTERPRETER_WORKERS", raising=False)
    monkeypatch.setenv("VLLM_RESPONSES_CODE_INTERPRETER_WORKERS", "4")
    assert _serve_args().code_interpreter_workers == 4
    monkeypatch.setenv("VR_CODE_INTERPRETER_WORKERS", "6")
    assert _serve_args().code_interpreter_workers == 6  # the older name wins when both are set
    assert _serve_args(["--code-interpreter-workers", "1"]).code_interpreter_workers == 1  # the flag wins


@pytest.mark.parametrize(
    ("text", "off"),
    [
        *[(word, True) for word in ("1", "true", "YES", " on ")],
        *[(word, False) for word in ("0", "false", "No", "off", "")],
    ],
)
def test_no_code_interpreter_env_is_a_boolean(monkeypatch: pytest.MonkeyPatch, text: str, off: bool) -> None:
    monkeypatch.setenv("VLLM_RESPONSES_NO_CODE_INTERPRETER", text)
    assert _serve_args().no_code_interpreter is off
    assert _serve_args(["--no-code-interpreter"]).no_code_interpreter is True


def test_no_code_interpreter_env_unset_and_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_RESPONSES_NO_CODE_INTERPRETER", raising=False)
    assert _serve_args().no_code_interpreter is False
    assert _serve_args(["--no-code-interpreter"]).no_code_interpreter is True


def test_no_code_interpreter_env_not_a_boolean_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_RESPONSES_NO_CODE_INTERPRETER", "maybe")
    with pytest.raises(SystemExit) as exit_:
        _serve_args()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "VLLM_RESPONSES_NO_CODE_INTERPRETER='maybe' is not a boolean" in err and "usage:" in err


def test_sandbox_pool_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    argv = ["serve", "--model", str(tmp_path / "m"), "--code-interpreter-max-workers", "5"]
    argv += ["--code-interpreter-memory-budget", "6g", "--code-interpreter-queue-timeout", "7"]
    argv += ["--code-interpreter-budget-counts", "caps", "--code-interpreter-worker-reserve", "300m"]
    assert cli.main([*argv, "--code-interpreter-user", "daemon"]) == 0
    assert cli.main(["serve", "--model", str(tmp_path / "m"), "--code-interpreter-user", ""]) == 0
    first, second = seen
    assert (first.code_interpreter_max_workers, first.code_interpreter_memory_budget) == (5, "6g")
    assert first.code_interpreter_queue_timeout == 7.0 and first.code_interpreter_user == "daemon"
    assert (first.code_interpreter_budget_counts, first.code_interpreter_worker_reserve) == ("caps", "300m")
    assert second.code_interpreter_user == "" and second.code_interpreter_max_workers is None
    assert (second.code_interpreter_budget_counts, second.code_interpreter_worker_reserve) == ("use", None)


def test_mcp_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    argv = ["serve", "--model", str(tmp_path / "m"), "--mcp-timeout", "4"]
    assert cli.main([*argv, "--mcp-allowed-urls", "http://10.0.0.5:9000/mcp, https://tools.example/"]) == 0
    assert cli.main(["serve", "--model", str(tmp_path / "m")]) == 0
    first, second = seen
    assert first.mcp_timeout == 4.0
    assert first.mcp_allowed_urls == ("http://10.0.0.5:9000/mcp", "https://tools.example/")
    assert second.mcp_allowed_urls == () and second.mcp_timeout == 30.0


def test_admission_counts_default_to_the_engine_and_refuse_nonsense(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VLLM_RESPONSES_MAX_CONCURRENT_RESPONSES", raising=False)
    args = _serve_args()
    assert args.max_concurrent_responses is None and args.max_queued_responses is None  # from the engine
    for argv in (["--max-concurrent-responses", "0"], ["--max-queued-responses", "-1"]):
        with pytest.raises(SystemExit) as exit_:
            _serve_args(argv)
        assert exit_.value.code == 2 and "must be at least" in capsys.readouterr().err


def test_the_shared_sandbox_flags_reach_the_config_and_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from interpreter_service.service.client import HTTPInterpreter
    from vllm_responses.server import interpreter_from_config

    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    monkeypatch.setenv("VLLM_RESPONSES_CODE_INTERPRETER_TOKEN", "env-s3cret")
    argv = ["serve", "--model", str(tmp_path / "m"), "--code-interpreter-url", "http://sandbox:8765/"]
    assert cli.main([*argv, "--code-interpreter-timeout", "7"]) == 0
    (config,) = seen
    assert (
        config.code_interpreter_url == "http://sandbox:8765/"
        and config.code_interpreter_token == "env-s3cret"
    )
    interp = interpreter_from_config(config)
    assert isinstance(interp, HTTPInterpreter) and interp.base_url == "http://sandbox:8765"
    assert interp.default_timeout_s == 7.0 and interp._headers == {"Authorization": "Bearer env-s3cret"}
    assert interpreter_from_config(dataclasses.replace(config, code_interpreter=False)) is None
    with pytest.raises(SystemExit):
        cli.build_parser(with_engine_args=False).parse_args(["serve", "--help"])
    assert "env-s3cret" not in capsys.readouterr().out  # a token from the environment is never printed


def _docs_table() -> dict[str, list[str]]:
    """docs/settings.md's table of flags: each row's environment variable, default and meaning, by flag."""
    rows: dict[str, list[str]] = {}
    for line in (Path(__file__).parents[1] / "docs" / "settings.md").read_text().splitlines():
        if line.startswith("| `--"):
            flag, *cells = line[2:].split(" | ", 3)
            rows[flag.split("`")[1]] = cells
    return rows


def _shown(default: str) -> str | None:
    """The first `code` span of a default cell: the value the docs give, if they give one."""
    found = re.search(r"`([^`]*)`", default)
    return found.group(1) if found else None


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_docs_settings_lists_every_setting(name: str) -> None:
    setting = SETTINGS[name]
    table = _docs_table()
    assert setting.flag in table, f"{setting.flag} is missing from docs/settings.md"
    env, default, _meaning = table[setting.flag]
    assert all(f"`{var}`" in env for var in setting.env_names), (setting.flag, env)
    if setting.default not in (None, ()) and not setting.switch:
        shown = _shown(default)
        assert shown is not None, (setting.flag, default)
        same = (
            shown == setting.default if isinstance(setting.default, str) else float(shown) == setting.default
        )
        assert same, (setting.flag, shown, setting.default)


def test_docs_settings_lists_no_other_flag_of_ours() -> None:
    ours = {setting.flag for setting in SETTINGS.values()}
    assert set(_docs_table()) - ours == {"--reasoning-parser"}  # vLLM's own flag, documented beside ours


def test_secrets_from_the_environment_are_never_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_RESPONSES_API_KEY", "sk-key-s3cret")
    monkeypatch.setenv("VLLM_RESPONSES_REASONING_KEY", "reasoning-s3cret")
    monkeypatch.setenv("VLLM_RESPONSES_DB", "postgresql://app:pw-s3cret@db.internal:5432/responses")
    monkeypatch.setenv("VLLM_RESPONSES_CODE_INTERPRETER_URL", "http://svc:tok-s3cret@sandbox:8765")
    for argv in (["serve", "--help"], ["db", "upgrade", "--help"]):
        with pytest.raises(SystemExit):
            cli.build_parser(with_engine_args=False).parse_args(argv)
        out = capsys.readouterr().out
        assert "s3cret" not in out
        assert "postgresql://app:***@db.internal:5432/responses" in out  # still shown, masked
    assert _serve_args().db == "postgresql://app:pw-s3cret@db.internal:5432/responses"  # the value is intact
    assert _serve_args().api_key == "sk-key-s3cret"
    assert _serve_args().reasoning_key == "reasoning-s3cret"
    assert (
        cli.masked("x postgres://u:p@h/d and https://a:b@c/") == "x postgres://u:***@h/d and https://a:***@c/"
    )

"""`PoolConfig`, what a pool is built from: by `python -m interpreter_service serve`'s flags and by the server's
settings, each flag landing in its field (no worker is started)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from interpreter_service.__main__ import _parser, _pool_config
from interpreter_service.pool import PoolConfig, WorkerPool


def test_serve_flags_build_the_pool_config(tmp_path: Path) -> None:
    argv = ["serve", "--workers", "3", "--spares", "2", "--max-spares", "5", "--max-starting", "1"]
    argv += [
        "--timeout",
        "12",
        "--memory-limit",
        "512m",
        "--idle-expiry",
        "60",
        "--allow-net",
        "a.test, b.test,",
    ]
    argv += ["--max-workers", "7", "--memory-budget", "8g", "--budget-counts", "caps", "--queue-timeout", "9"]
    argv += ["--user", "", "--isolation", "none", "--dist-dir", str(tmp_path)]
    config = _pool_config(_parser().parse_args(argv))
    assert config == PoolConfig(
        workers=3,
        spares=2,
        max_spares=5,
        max_starting=1,
        timeout_s=12.0,
        memory_limit="512m",
        idle_expiry_s=60.0,
        allow_net=["a.test", " b.test"],
        max_workers=7,
        memory_budget="8g",
        budget_counts="caps",
        queue_timeout_s=9.0,
        user="",
        isolation="none",
        dist_dir=tmp_path,
    )
    defaults = _pool_config(_parser().parse_args(["serve"]))
    assert dataclasses.replace(defaults, allow_net=()) == PoolConfig() and defaults.allow_net == []


def test_the_server_settings_build_the_pool_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vllm_responses import cli
    from vllm_responses.config import Config
    from vllm_responses.server import interpreter_from_config

    (tmp_path / "pyodide.mjs").write_text("")  # what the distribution check looks for
    (tmp_path / "pyodide-lock.json").write_text("{}")
    monkeypatch.setenv("VR_PYODIDE_CACHE_DIR", str(tmp_path))
    seen: list[Config] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    argv = ["serve", "--model", str(tmp_path / "m"), "--code-interpreter-workers", "3"]
    argv += ["--code-interpreter-queue-timeout", "9", "--code-interpreter-isolation", "none"]
    assert cli.main(argv) == 0
    (config,) = seen
    pool = interpreter_from_config(config)
    assert isinstance(pool, WorkerPool)
    made = pool.config
    assert (made.workers, made.queue_timeout_s, made.isolation) == (3, 9.0, "none")
    assert (made.timeout_s, made.idle_expiry_s) == (
        config.code_interpreter_timeout,
        config.code_interpreter_idle_expiry,
    )
    assert pool.queue_timeout_s == 9.0 and pool.cfg.dist_dir == tmp_path.resolve()

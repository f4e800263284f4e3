"""The benchmark scripts in `--quick` mode, so they do not rot: each runs and writes sane JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_quick(script: str, out: Path, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, str(ROOT / "scripts" / script), "--quick", "--out", str(out), *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    found = list(out.glob("*-quick.json"))
    assert len(found) == 1, found
    data: dict[str, Any] = json.loads(found[0].read_text())
    assert data["machine"]["cores"] >= 1 and data["machine"]["date"]
    return data


@pytest.mark.slow
@pytest.mark.engine
def test_gateway_quick(tmp_path: Path) -> None:
    data = run_quick("bench_gateway.py", tmp_path)
    assert set(data["targets"]) == {"raw", "ours"}
    for name, target in data["targets"].items():
        assert set(target["levels"]) == {"1", "2"}, name
        for level in target["levels"].values():
            assert level["errors"] == 0, level["error_examples"]
            assert level["tokens_min"] == level["tokens_max"] == data["config"]["max_tokens"], name
            assert level["ttft_p50_s"] > 0 and level["total_tok_s"] > 0
    assert data["ratios_to_raw"]["ours"]["2"]["total_tok_s"] > 0
    assert {"tok_s_ge_97pct_of_raw", "ttft_p50_added_lt_5ms"} <= set(data["checks"])


@pytest.mark.slow
@pytest.mark.sandbox
def test_interpreter_quick(tmp_path: Path) -> None:
    data = run_quick("bench_interpreter.py", tmp_path)
    single = data["single_worker"]
    assert single["print_ms"]["p50"] > 0 and single["print_ms"]["n"] == 50
    assert single["matplotlib_png_ms"]["png_bytes"] > 1000
    assert single["new_container_ms"]["p50"] >= 0 and single["rss_mib"]["warm_idle"] > 0
    assert single["timeout_0_5s"]["error_kind"] == "timeout"
    assert set(data["scaling"]["cpu"]) == {"1", "2"} and data["scaling"]["cpu"]["1"]["ratio_to_1"] == 1.0
    assert data["worker_start"]["bare"]["ready_s_p50"] > 0


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.sandbox
def test_agent_quick(tmp_path: Path) -> None:
    data = run_quick("bench_agent.py", tmp_path)
    assert data["answer_exact"] is True and data["turns"] == 2
    for turn in (data["first_turn_new_container"], {k: v["p50"] for k, v in data["warm_container"].items()}):
        assert turn["engine_calls"] == 2
        assert turn["engine_ms"] > 0 and turn["sandbox_ms"] > 0
        assert turn["total_ms"] >= turn["engine_ms"] + turn["sandbox_ms"]


def test_report_renders_quick_results(tmp_path: Path) -> None:
    """The report script renders tables from result files (here: a minimal synthetic gateway run)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_report import render

    level = {"requests": 2, "errors": 0, "ttft_p50_s": 0.01, "ttft_p95_s": 0.02, "total_tok_s": 100.0,
             "per_stream_tok_s": 50.0}
    gateway = {
        "machine": {"date": "today", "cores": 2},
        "config": {"model": "tiny", "engine_flags": ["--dtype", "bfloat16"], "max_tokens": 16, "length": "regex",
                   "repeats": 1},
        "targets": {"raw": {"ready_s": 1.0, "levels": {"2": level}}, "ours": {"ready_s": 1.0, "levels": {"2": level}}},
        "ratios_to_raw": {"ours": {"2": {"total_tok_s": 1.0, "ttft_p50_added_ms": 0.0}}},
        "checks": {"level": 2, "tok_s_ge_97pct_of_raw": True},
    }
    text = render({"gateway-tiny": gateway})
    assert "| ours /v1/responses | 2 | 10.0 ms | 20.0 ms | 100.0 |" in text

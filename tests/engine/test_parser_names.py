"""Parser names: ours first, then vLLM's registries; unknown names fail at start-up; docs/parsers.md lists them all."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.engine.parsers.vllm_transcripts import CASES
from vllm_responses import cli
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.parser_names import (
    reasoning_parser_route,
    tool_parser_route,
    vllm_reasoning_parser_names,
    vllm_tool_parser_names,
)

REPO = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("parser_table", REPO / "scripts" / "parser_table.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["parser_table"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_our_names_win_and_vllm_only_names_go_to_the_adapter() -> None:
    assert "hermes" in vllm_tool_parser_names() and tool_parser_route("hermes") == "ours"
    assert tool_parser_route("pythonic") == "ours" and tool_parser_route("auto") == "ours"
    for name in ("kimi_k2", "qwen3_xml", "glm45", "deepseek_v3", "internlm", "xlam", "minimax_m2"):
        assert tool_parser_route(name) == "vllm", name


def test_reasoning_routes() -> None:
    assert reasoning_parser_route("deepseek_r1") == "think" and reasoning_parser_route("qwen3") == "think"
    assert reasoning_parser_route("openai_gptoss") == "harmony"
    assert reasoning_parser_route("granite") == "vllm" and reasoning_parser_route("kimi_k2") == "vllm"


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(EngineError, match="unknown tool-call parser 'nope'") as tool:
        tool_parser_route("nope")
    assert "hermes" in tool.value.message and "kimi_k2" in tool.value.message
    with pytest.raises(EngineError, match="reasoning parser 'nope' is not supported") as reasoning:
        reasoning_parser_route("nope")
    assert "deepseek_r1" in reasoning.value.message and "granite" in reasoning.value.message


@pytest.mark.parametrize(
    ("flag", "word"), [("--tool-call-parser", "tool-call"), ("--reasoning-parser", "reasoning")]
)
def test_an_unknown_name_is_a_start_up_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, word: str
) -> None:
    started: list[object] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: started.append(config) or 0)
    assert cli.main(["serve", "--model", str(tmp_path), flag, "no_such_parser"]) == 2
    err = capsys.readouterr().err
    assert f"{word} parser 'no_such_parser'" in err and "kimi_k2" in err
    assert not started


def test_a_vllm_only_name_reaches_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[object] = []
    monkeypatch.setattr("vllm_responses.server.run", lambda config: seen.append(config) or 0)
    argv = [
        "serve",
        "--model",
        str(tmp_path),
        "--tool-call-parser",
        "kimi_k2",
        "--reasoning-parser",
        "kimi_k2",
    ]
    assert cli.main(argv) == 0
    (config,) = seen
    assert config.tool_parser == "kimi_k2"  # type: ignore[attr-defined]
    assert config.engine_args["args"].reasoning_parser == "kimi_k2"  # type: ignore[attr-defined]


def test_the_doc_table_is_current_and_names_every_registry_name() -> None:
    script = _script()
    doc = (REPO / "docs" / "parsers.md").read_text()
    assert f"{script.START}\n{script.table()}\n{script.END}" in doc, "run scripts/parser_table.py --write"
    for name in vllm_tool_parser_names():
        assert f"| `{name}` |" in doc.split("--reasoning-parser` | path")[0], name
    for name in vllm_reasoning_parser_names():
        assert f"| `{name}` |" in doc.split("--reasoning-parser` | path")[1], name


def test_the_doc_says_which_families_have_transcripts() -> None:
    script = _script()
    assert {c.tool for c in CASES if c.tool} == script.TESTED_TOOL
    assert {c.reasoning for c in CASES if c.reasoning} == script.TESTED_REASONING

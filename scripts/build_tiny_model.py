"""Build a tiny random-weight Llama model folder (byte-level tokenizer, tool-aware template) for tests."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "build", "main"]

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from vllm_responses.engine.models import save_model_folder  # noqa: E402

DEFAULT_OUT = REPO_ROOT / "models" / "tiny-tool-model"
SEED = 1234
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Hermes/Qwen-style ChatML template: a tools section, assistant calls as <tool_call>{json}</tool_call>,
# consecutive `tool` turns folded into one user turn of <tool_response> blocks.
CHAT_TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
{%- for tool in tools %}{{- '\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or (message.role == 'assistant' and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""

MODEL_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,  # head_dim 32: the smallest size vLLM's CPU attention supports
    "num_key_value_heads": 1,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}


def _fingerprint() -> str:
    """Changes whenever what this script would build changes (then the folder is rebuilt)."""
    src = json.dumps([CHAT_TEMPLATE, MODEL_CONFIG, SPECIAL_TOKENS, SEED], sort_keys=True)
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def _build_tokenizer():  # -> PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # Byte-level BPE without merges: one token per byte, so any text (JSON, code, tags) encodes.
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in alphabet:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=MODEL_CONFIG["max_position_embeddings"],
    )


def build(out: Path = DEFAULT_OUT, *, force: bool = False) -> Path:
    """Build the model folder at `out` unless an identical build is already there; return `out`."""
    out = Path(out)
    stamp = out / "BUILD_STAMP"
    fp = _fingerprint()
    if not force and stamp.exists() and stamp.read_text().strip() == fp:
        return out

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = _build_tokenizer()
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = LlamaConfig(
        vocab_size=len(tokenizer), eos_token_id=eos, bos_token_id=pad, pad_token_id=pad, **MODEL_CONFIG
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=pad)

    return save_model_folder(model, tokenizer, out, {"BUILD_STAMP": fp + "\n"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    ap.add_argument("--force", action="store_true", help="rebuild even if an identical build exists")
    ns = ap.parse_args(argv)
    path = build(ns.out, force=ns.force)
    print(f"tiny model ready: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

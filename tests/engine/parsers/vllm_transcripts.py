"""Hand-written model outputs of the families vLLM's parsers read, and a hub-free tokenizer that knows their tokens."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vllm_responses.engine.types import ToolSpec, code_tool_spec

__all__ = ["CASES", "CODE", "TOOLS", "Case", "random_splits", "token_chunks", "tokenizer"]

WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
)
TOOLS = (WEATHER, code_tool_spec())
PARIS = {"city": "Paris", "days": 2}
CODE = 'print("hi")\nx = {"a": 1}'
ARGS = json.dumps(PARIS)

DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL, DS_CALL_END, DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
DEEPSEEK = (DS_BEGIN, DS_END, DS_CALL, DS_CALL_END, DS_SEP)
KIMI = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_end|>",
    "<|tool_call_argument_begin|>",
)
GLM = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
THINK = ("<think>", "</think>")


@dataclass(frozen=True)
class Case:
    """One transcript: the raw output, which vLLM parsers read it, and what must come out."""

    id: str
    tool: str | None  # vLLM tool-call parser name
    reasoning: str | None  # vLLM reasoning parser name
    output: str
    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    thought: str = ""
    specials: tuple[str, ...] = ()  # special tokens the family's tokenizer has
    words: tuple[str, ...] = ()  # ordinary multi-character tokens a parser expects to arrive whole


def _hermes(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


CASES = (
    Case(
        "hermes",
        "hermes",
        None,
        "Sure. " + _hermes("get_weather", PARIS) + "\n" + _hermes("python", {"code": CODE}),
        "Sure. ",
        (("get_weather", PARIS), ("python", {"code": CODE})),
        specials=("<tool_call>", "</tool_call>"),
    ),
    Case(
        "mistral",
        "mistral",
        None,
        "Checking.[TOOL_CALLS]get_weather[ARGS]" + ARGS,
        "Checking.",
        (("get_weather", PARIS),),
        specials=("[TOOL_CALLS]", "[ARGS]"),
    ),
    Case(
        "deepseek_v3",
        "deepseek_v3",
        None,
        f"Checking.{DS_BEGIN}{DS_CALL}function{DS_SEP}get_weather\n```json\n{ARGS}\n```{DS_CALL_END}{DS_END}",
        "Checking.",
        (("get_weather", PARIS),),
        specials=DEEPSEEK,
    ),
    Case(
        "deepseek_v31",
        "deepseek_v31",
        None,
        f"Checking.{DS_BEGIN}{DS_CALL}get_weather{DS_SEP}{ARGS}{DS_CALL_END}"
        f"{DS_CALL}python{DS_SEP}{json.dumps({'code': CODE})}{DS_CALL_END}{DS_END}",
        "Checking.",
        (("get_weather", PARIS), ("python", {"code": CODE})),
        specials=DEEPSEEK,
    ),
    Case(
        "qwen3_xml",
        "qwen3_xml",
        None,
        "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n"
        f"<tool_call>\n<function=python>\n<parameter=code>\n{CODE}\n</parameter>\n</function>\n</tool_call>",
        "Let me check.\n\n",  # vLLM passes the newline between the two calls on as text
        (("get_weather", PARIS), ("python", {"code": CODE})),
        specials=("<tool_call>", "</tool_call>"),
    ),
    Case(
        "kimi_k2",
        "kimi_k2",
        None,
        f"On it.{KIMI[0]}{KIMI[2]}functions.get_weather:0{KIMI[4]}{ARGS}{KIMI[3]}"
        f"{KIMI[2]}functions.python:1{KIMI[4]}{json.dumps({'code': CODE})}{KIMI[3]}{KIMI[1]}",
        "On it.",
        (("get_weather", PARIS), ("python", {"code": CODE})),
        specials=KIMI,
    ),
    Case(
        "glm45",
        "glm45",
        None,
        "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
        "Checking.",
        (("get_weather", PARIS),),
        specials=GLM,
    ),
    Case(
        "glm47",
        "glm47",
        None,
        f"<tool_call>python<arg_key>code</arg_key><arg_value>{CODE}</arg_value></tool_call>",
        "",
        (("python", {"code": CODE}),),
        specials=GLM,
    ),
    Case(
        "granite",
        "granite",
        None,
        "<|tool_call|>" + json.dumps([{"name": "get_weather", "arguments": PARIS}]),
        "",
        (("get_weather", PARIS),),
        specials=("<|tool_call|>",),
    ),
    Case(
        "internlm",
        "internlm",
        None,
        "Checking.<|action_start|><|plugin|>\n"
        + json.dumps({"name": "get_weather", "parameters": PARIS})
        + "<|action_end|>",
        "Checking.",
        (("get_weather", PARIS),),
        specials=("<|action_start|>", "<|action_end|>", "<|plugin|>"),
    ),
    Case(
        "xlam",
        "xlam",
        None,
        json.dumps(
            [{"name": "get_weather", "arguments": PARIS}, {"name": "python", "arguments": {"code": CODE}}]
        ),
        "",
        (("get_weather", PARIS), ("python", {"code": CODE})),
    ),
    Case(
        "minimax_m2",
        "minimax_m2",
        None,
        'Checking.\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
        '<parameter name="days">2</parameter>\n</invoke>\n</minimax:tool_call>',
        "Checking.\n",
        (("get_weather", PARIS),),
        specials=("<minimax:tool_call>", "</minimax:tool_call>"),
    ),
    Case(
        "llama3_json",
        "llama3_json",
        None,
        json.dumps({"name": "get_weather", "parameters": PARIS}),
        "",
        (("get_weather", PARIS),),
        specials=("<|python_tag|>",),
    ),
    Case(
        "pythonic",
        "pythonic",
        None,
        '[get_weather(city="Paris", days=2), python(code="print(1)")]',
        "",
        (("get_weather", PARIS), ("python", {"code": "print(1)"})),
    ),
    Case(
        "phi4_mini_json",
        "phi4_mini_json",
        None,
        "functools" + json.dumps([{"name": "get_weather", "arguments": PARIS}]),
        "",
        (("get_weather", PARIS),),
    ),
    Case(
        "r1",
        None,
        "deepseek_r1",
        "<think>Add 2 and 3.</think>It is 5.",
        "It is 5.",
        thought="Add 2 and 3.",
        specials=THINK,
    ),
    Case(
        "r1_open",
        None,
        "deepseek_r1",
        "Add 2 and 3.</think>It is 5.",
        "It is 5.",
        thought="Add 2 and 3.",
        specials=THINK,
    ),
    Case(
        "qwen3",
        None,
        "qwen3",
        "<think>Add 2 and 3.</think>\n\nIt is 5.",
        "\n\nIt is 5.",
        thought="Add 2 and 3.",
        specials=THINK,
    ),
    Case(
        "granite_reasoning",
        None,
        "granite",
        "Here is my thought process: Add 2 and 3. Here is my response: It is 5.",
        " It is 5.",
        thought=" Add 2 and 3. ",
        words=("Here", " is", " my", " thought", " process", " response", ":"),
    ),
    Case(
        "mistral_reasoning",
        None,
        "mistral",
        "[THINK]Add 2 and 3.[/THINK]It is 5.",
        "It is 5.",
        thought="Add 2 and 3.",
        specials=("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"),
    ),
    Case(
        "qwen3_both",
        "qwen3_xml",
        "qwen3",
        "<think>Weather first.</think>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
        "",
        (("get_weather", PARIS),),
        thought="Weather first.",
        specials=("<tool_call>", "</tool_call>", *THINK),
    ),
)


@lru_cache(maxsize=None)
def tokenizer(specials: tuple[str, ...] = (), words: tuple[str, ...] = ()) -> Any:
    """A byte-level tokenizer built here (no hub, no files): one token per byte, plus `specials` as special
    tokens and `words` as ordinary added tokens, as a family's own tokenizer has them."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(specials))
    tok.add_tokens([AddedToken(w, normalized=False) for w in words])
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def token_chunks(tok: Any, text: str) -> list[tuple[str, list[int]]]:
    """`text` as the engine streams it: one token at a time, the text of each (bytes of a character split
    across tokens held back until it is whole, as vLLM's detokenizer does) with its ids."""
    ids = tok.encode(text, add_special_tokens=False)
    out: list[tuple[str, list[int]]] = []
    done, pending = "", []
    for k, i in enumerate(ids):
        pending.append(i)
        cur = tok.decode(ids[: k + 1], skip_special_tokens=False)
        if cur.endswith("\ufffd"):
            continue
        out.append((cur[len(done) :], pending))
        done, pending = cur, []
    assert done == text, (done, text)
    return out


def random_splits(chunks: list[tuple[str, list[int]]], seed: int) -> list[tuple[str, list[int]]]:
    """Consecutive token chunks merged at random points (as a loaded engine hands out several tokens)."""
    rng = random.Random(seed)
    out: list[tuple[str, list[int]]] = []
    for text, ids in chunks:
        if out and rng.random() < 0.6:
            out[-1] = (out[-1][0] + text, out[-1][1] + ids)
        else:
            out.append((text, list(ids)))
    return out

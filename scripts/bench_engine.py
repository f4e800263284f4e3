"""Measure engine build time, time to first event and tok/s through `VLLMEngine` (tiny and default models).

Run: `python scripts/bench_engine.py [--model tiny|default] [--streams 1,8]`. (A benchmark, not a test.)
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vllm_responses.engine.types import Finish, GenerateRequest, Message, Sampling

__all__ = ["main"]

PROMPT = (Message("user", "Tell me a long story about a cat."),)


async def one(engine, i: int, sampling: Sampling) -> tuple[float, int, float]:
    request = GenerateRequest(f"bench-{i}", PROMPT, sampling=sampling)
    t0 = time.monotonic()
    ttft = None
    tokens = 0
    async for event in engine.generate(request):
        if ttft is None:
            ttft = time.monotonic() - t0
        if isinstance(event, Finish):
            tokens = event.usage.output_tokens
    return ttft or 0.0, tokens, time.monotonic() - t0


async def one_raw(engine, i: int, sampling: Sampling) -> tuple[float, int, float]:
    """The same call straight on `AsyncLLM` (no rendering, parsing or event mapping): the baseline."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    request = GenerateRequest(f"raw-{i}", PROMPT)
    ids = engine._encode(engine.render(request))
    so = StructuredOutputsParams(**sampling.structured) if sampling.structured else None
    params = SamplingParams(
        max_tokens=sampling.max_tokens,
        temperature=0.0,
        output_kind=RequestOutputKind.DELTA,
        structured_outputs=so,
    )
    t0 = time.monotonic()
    ttft = None
    tokens = 0
    async for out in engine.llm.generate(TokensPrompt(prompt_token_ids=ids), params, f"raw-{i}-{t0}"):
        if ttft is None:
            ttft = time.monotonic() - t0
        tokens += len(out.outputs[0].token_ids)
    return ttft or 0.0, tokens, time.monotonic() - t0


async def bench(model: str, streams: list[int], max_tokens: int, repeats: int) -> dict:
    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace
    from vllm_responses.engine.models import default_model_path, tiny_model_path
    from vllm_responses.engine.vllm import VLLMEngine

    path = tiny_model_path() if model == "tiny" else default_model_path()
    ns = add_engine_cli_args(argparse.ArgumentParser()).parse_args(["--seed", "0"])
    args = engine_args_from_namespace(ns, str(path))
    t0 = time.monotonic()
    engine = await VLLMEngine.start(args)
    result: dict = {
        "date": datetime.date.today().isoformat(),
        "model": model,
        "dtype": args.dtype,
        "engine_build_s": round(time.monotonic() - t0, 1),
        "max_tokens": max_tokens,
    }
    # The tiny model's text is forced (random weights would stop at a random end token); the
    # default model decodes freely at temperature 0 (it may stop early: tokens are counted).
    structured = {"regex": f"[a-z ]{{{max_tokens}}}"} if model == "tiny" else None
    sampling = Sampling(max_tokens=max_tokens, temperature=0.0, structured=structured)
    try:
        fns = {"engine": one, "raw": one_raw}
        for n in sorted(set(streams)):  # warm-up: the first batches of a new size are slow (CPU kernels)
            for fn in fns.values():
                await asyncio.gather(*(fn(engine, -1 - i, sampling) for i in range(n)))
        for n in streams:
            stats: dict[str, dict[str, list[float]]] = {k: {"ttft": [], "rate": [], "total": []} for k in fns}
            for rep in range(repeats):  # alternate engine / raw so both see the same machine load
                order = list(fns.items()) if rep % 2 == 0 else list(fns.items())[::-1]
                for label, fn in order:
                    t = time.monotonic()
                    runs = await asyncio.gather(*(fn(engine, i, sampling) for i in range(n)))
                    wall = time.monotonic() - t
                    stats[label]["ttft"] += [r[0] for r in runs]
                    stats[label]["rate"] += [r[1] / (r[2] - r[0]) for r in runs if r[2] > r[0]]
                    stats[label]["total"].append(sum(r[1] for r in runs) / wall)
            for label, st in stats.items():
                result[f"{label}_streams_{n}"] = {
                    "ttft_s_median": round(statistics.median(st["ttft"]), 3),
                    "per_stream_tok_s_median": round(statistics.median(st["rate"]), 1),
                    "total_tok_s_median": round(statistics.median(st["total"]), 1),
                }
    finally:
        await engine.aclose()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=["tiny", "default"], default="tiny")
    ap.add_argument("--streams", default="1,8")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=6)
    ns = ap.parse_args(argv)
    streams = [int(s) for s in ns.streams.split(",")]
    print(json.dumps(asyncio.run(bench(ns.model, streams, ns.max_tokens, ns.repeats))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

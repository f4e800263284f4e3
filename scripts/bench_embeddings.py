"""Texts embedded per second by the served embedding model (all-MiniLM-L6-v2 in a pooling vLLM engine, through
`VLLMEmbedder`) at batch sizes 1, 16 and 64, against the same model run directly with torch (transformers,
float32, mean pooling) in the same run; the engine's load time and the memory it adds.

Run: `python scripts/bench_embeddings.py [--quick] [--out DIR]`. Writes `DIR/embeddings[-quick].json`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from benchlib import machine_info, write_json  # noqa: E402

__all__ = ["main", "texts", "tree_rss_mib"]

BATCHES = (1, 16, 64)
_WORDS = (
    "the a river city model server vector search quiet engine paper garden winter library number small "
    "bright question answer history machine light music morning table window story ocean code"
).split()


def texts(n: int) -> list[str]:
    """`n` different sentences of 12 to 27 words (a chunk of prose as retrieval embeds it), the same every run."""
    out = []
    for i in range(n):
        words = [_WORDS[(i * 7 + j * 13 + j * j) % len(_WORDS)] for j in range(12 + i % 16)]
        out.append(" ".join(words).capitalize() + f" ({i}).")
    return out


def tree_rss_mib() -> float:
    """The resident memory of this process and all its descendants (vLLM's engine processes), in MiB (pages
    shared between them counted in each)."""
    import psutil

    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return round(total / 2**20, 1)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


async def rate(embed: Any, corpus: list[str], batch: int) -> float:
    """Texts per second embedding `corpus` in consecutive batches of `batch` (one call each)."""
    t0 = time.monotonic()
    for start in range(0, len(corpus), batch):
        await embed(corpus[start : start + batch])
    return len(corpus) / (time.monotonic() - t0)


async def bench(quick: bool) -> dict[str, Any]:
    from tests.support.embedding_reference import ReferenceEmbedder
    from vllm_responses.engine.args import cpu_dtype, is_cpu_platform
    from vllm_responses.engine.models import default_embedding_model_path
    from vllm_responses.engine.vllm_embedder import VLLMEmbedder, pooling_engine_args

    folder = default_embedding_model_path()
    if folder is None:
        raise SystemExit("the embedded embedding model is not set up: run scripts/setup.sh")
    cpu = is_cpu_platform()
    dtype = cpu_dtype() if cpu else "auto"
    rss_before = tree_rss_mib()
    t0 = time.monotonic()
    ours = await VLLMEmbedder.start(pooling_engine_args(str(folder), dtype=dtype, cpu=cpu), folder.name)
    load_s = time.monotonic() - t0
    rss_loaded = tree_rss_mib()
    reference = ReferenceEmbedder(folder)
    per_batch = 64 if quick else 512
    corpus = texts(per_batch)
    results: dict[str, Any] = {}
    try:

        async def engine(batch: list[str]) -> None:
            await ours.embed(batch)

        async def torch_direct(batch: list[str]) -> None:
            reference.embed(batch)

        got, want = (await ours.embed(corpus[:16])).vectors, reference.embed(corpus[:16])
        agreement = min(cosine(a, b) for a, b in zip(got, want, strict=True))
        for b in BATCHES:  # warm-up: the first batches of a new size are slow (CPU kernels)
            await engine(corpus[:b])
            await torch_direct(corpus[:b])
        for b in BATCHES:
            runs: dict[str, list[float]] = {"engine": [], "torch": []}
            for rep in range(1 if quick else 3):  # alternated, so both see the same machine load
                order = [("engine", engine), ("torch", torch_direct)]
                for label, fn in order if rep % 2 == 0 else order[::-1]:
                    runs[label].append(await rate(fn, corpus, b))
            best = {k: max(v) for k, v in runs.items()}
            results[str(b)] = {
                "engine_texts_per_s": round(best["engine"], 1),
                "torch_texts_per_s": round(best["torch"], 1),
                "ratio_engine_to_torch": round(round(best["engine"], 1) / round(best["torch"], 1), 3),
            }
        rss_used = tree_rss_mib()
    finally:
        await ours.aclose()
    return {
        "machine": machine_info(),
        "model": folder.name,
        "dtype": dtype,
        "texts_per_batch_size": per_batch,
        "words_per_text": [12, 27],
        "load_s": round(load_s, 1),
        "rss_mib": {"before": rss_before, "engine_loaded": rss_loaded, "after_runs": rss_used},
        "rss_added_by_engine_mib": round(rss_loaded - rss_before, 1),
        "min_cosine_to_torch": round(agreement, 6),
        "batches": results,
        "checks": {"cosine_to_torch_gt_0_999": agreement > 0.999},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="64 texts per batch size, one round")
    ap.add_argument("--out", default=str(REPO / "bench-results"), help="folder of the JSON result")
    ns = ap.parse_args(argv)
    data = asyncio.run(bench(ns.quick))
    path = write_json(ns.out, "embeddings-quick" if ns.quick else "embeddings", data)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

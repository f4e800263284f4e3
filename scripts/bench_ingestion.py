"""Ingestion throughput on this machine: files made searchable through the server's own path (the Files API's
store, a vector store file batch, `Ingestion`: text extracted, chunked, embedded in batches by the embedded
all-MiniLM-L6-v2 in a pooling vLLM engine in this process, indexed in SQLite), and where the time goes.

The files are text that ships with Python, the same every run on one Python version:
  txt   the Python Language Reference's sections that `help()` shows (`pydoc_data/topics.py`), one file each
  py    standard library modules' source (SOURCES)
  html  those modules' documentation as `pydoc` renders it in HTML
  pdf   a few sections as PDFs, a paragraph a page (tests/support/pdfs.py), read by the extraction workers
Reported: wall time from the batch's creation to its last file done, and from it chunks, embedding windows (a chunk
over the model's 254-token bound is embedded as several), files, MB of input and of extracted text per second;
the time in each step (extract: the file read from the store and its text extracted; chunk: tokenized and cut;
embed: windows, model calls, means; index: the SQLite write), summed over files and as shares of their sum
(two files are ingested at once, so the sum exceeds the wall time), the model's own share of `embed`, and
extraction's ms per MB by kind. Then the texts per model call (`chunk_vectors.BATCH`, 64 as served) varied on
the txt files. The timers wrap the ingestion's own functions; nothing of it is re-implemented.

Run: `python scripts/bench_ingestion.py [--batch-sizes 16,64,256] [--quick] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, machine_info, write_json
from retrievallib import embedding_model, ingest, vector_store_service

from vllm_responses.engine.embedder import Embedded, Embedder, EmbedInput
from vllm_responses.retrieval import chunk_vectors
from vllm_responses.retrieval.sqlite_index import SQLiteIndex
from vllm_responses.service import ingestion

__all__ = ["SOURCES", "Timers", "corpus", "main", "summarize"]

STAGES = ("extract", "chunk", "embed", "index")
SOURCES = (
    "json.decoder",
    "textwrap",
    "heapq",
    "bisect",
    "string",
    "contextlib",
    "functools",
    "shlex",
    "fractions",
)
PDF_TOPICS = ("assignment", "exceptions", "execmodel", "import")


def corpus(quick: bool) -> list[tuple[str, bytes]]:
    """The files (name, bytes) of all four kinds; `quick`: a few of each, mostly small."""
    import pydoc
    from pydoc_data.topics import topics

    from tests.support.pdfs import make_pdf

    smallest = sorted(topics, key=lambda k: len(topics[k]))[:5]
    labels = [*smallest, PDF_TOPICS[0]] if quick else sorted(topics)  # quick: one of many windows too
    sources = SOURCES[:2] if quick else SOURCES
    files = [(f"{label}.txt", topics[label].encode()) for label in labels]
    for name in sources:
        module = importlib.import_module(name)
        files.append((f"{name}.py", Path(str(module.__file__)).read_bytes()))
        html = pydoc.HTMLDoc().page(name, pydoc.HTMLDoc().docmodule(module))
        files.append((f"{name}.html", html.encode()))
    for label in PDF_TOPICS[:1] if quick else PDF_TOPICS:
        paragraphs = topics[label].encode("latin-1", "replace").decode("latin-1").split("\n\n")
        pages = [p.replace("\n", " ") for p in paragraphs if p.strip()]  # Helvetica: Latin-1 only
        files.append((f"{label}.pdf", make_pdf(pages)))
    return files


class Timers:
    """Seconds per step, summed over files (thread-safe: chunking runs in worker threads), and counts."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.model_s = 0.0
        self.counts = {"chunks": 0, "windows": 0, "model_calls": 0, "tokens": 0, "text_bytes": 0}
        self.by_kind: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def add(self, stage: str, seconds: float, **counts: int) -> None:
        with self._lock:
            self.seconds[stage] += seconds
            for name, n in counts.items():
                self.counts[name] += n

    def extracted(self, kind: str, seconds: float, input_bytes: int, text_bytes: int) -> None:
        with self._lock:
            one = self.by_kind.setdefault(
                kind, {"files": 0, "seconds": 0.0, "input_bytes": 0, "text_bytes": 0}
            )
            one["files"] += 1
            one["seconds"] += seconds
            one["input_bytes"] += input_bytes
            one["text_bytes"] += text_bytes


class TimedEmbedder:
    """The embedding model, each call's time and inputs counted in `timers` (the `Embedder` interface)."""

    def __init__(self, model: Embedder, timers: Timers) -> None:
        self.model = model
        self.timers = timers

    @property
    def model_name(self) -> str:
        return self.model.model_name

    @property
    def dimensions(self) -> int:
        return self.model.dimensions

    @property
    def max_input_tokens(self) -> int | None:
        return self.model.max_input_tokens

    @property
    def dead(self) -> bool:
        return self.model.dead

    async def count_tokens(self, inputs: Sequence[EmbedInput]) -> list[int]:
        return await self.model.count_tokens(inputs)

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded:
        t0 = time.perf_counter()
        done = await self.model.embed(inputs)
        with self.timers._lock:
            self.timers.model_s += time.perf_counter() - t0
            self.timers.counts["model_calls"] += 1
            self.timers.counts["windows"] += len(inputs)
            self.timers.counts["tokens"] += done.tokens
        return done

    async def aclose(self) -> None:
        await self.model.aclose()


@contextlib.contextmanager
def timed(timers: Timers) -> Iterator[None]:
    """The ingestion's four steps timed into `timers` while inside."""
    parts, chunk, embed, add = (
        ingestion.Ingestion._parts,
        ingestion.chunk_text,
        ingestion.embed_chunks,
        SQLiteIndex.add_file,
    )

    async def timed_parts(self: Any, row: Any) -> list[str]:
        t0 = time.perf_counter()
        out = await parts(self, row)
        spent = time.perf_counter() - t0
        size = len("\n".join(out).encode())  # the text that is chunked
        timers.add("extract", spent, text_bytes=size)
        stored = await self.files.store.get_file(row.file_id)
        if stored is not None:
            timers.extracted(stored.filename.rsplit(".", 1)[-1], spent, stored.bytes, size)
        return out

    def timed_chunk(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = chunk(*args, **kwargs)
        timers.add("chunk", time.perf_counter() - t0, chunks=len(out))
        return out

    async def timed_embed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = await embed(*args, **kwargs)
        timers.add("embed", time.perf_counter() - t0)
        return out

    async def timed_add(self: Any, *args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        await add(self, *args, **kwargs)
        timers.add("index", time.perf_counter() - t0)

    ingestion.Ingestion._parts = timed_parts  # type: ignore[method-assign]
    ingestion.chunk_text = timed_chunk  # type: ignore[assignment]
    ingestion.embed_chunks = timed_embed
    SQLiteIndex.add_file = timed_add  # type: ignore[method-assign]
    try:
        yield
    finally:
        ingestion.Ingestion._parts = parts  # type: ignore[method-assign]
        ingestion.chunk_text = chunk
        ingestion.embed_chunks = embed
        SQLiteIndex.add_file = add  # type: ignore[method-assign]


def summarize(timers: Timers, files: int, input_bytes: int, wall_s: float) -> dict[str, Any]:
    """Throughput and the breakdown from one run's timers (ratios of the rounded figures where both are shown)."""
    wall_s = round(wall_s, 3)  # the figure reported, which the rates are of
    total = sum(timers.seconds.values())
    c = timers.counts
    per_s = lambda n: round(n / wall_s, 2)  # noqa: E731
    return {
        "files": files,
        "input_mb": round(input_bytes / 1e6, 3),
        "text_mb": round(c["text_bytes"] / 1e6, 3),
        **{name: c[name] for name in ("chunks", "windows", "model_calls", "tokens")},
        "wall_s": wall_s,
        "chunks_per_s": per_s(c["chunks"]),
        "windows_per_s": per_s(c["windows"]),
        "tokens_per_s": per_s(c["tokens"]),
        "files_per_s": per_s(files),
        "input_mb_per_s": round(input_bytes / 1e6 / wall_s, 4),
        "text_mb_per_s": round(c["text_bytes"] / 1e6 / wall_s, 4),
        "stage_s": {k: round(v, 3) for k, v in timers.seconds.items()},
        "stage_share": {k: round(v / total, 3) if total else None for k, v in timers.seconds.items()},
        "model_share_of_embed": round(timers.model_s / timers.seconds["embed"], 3)
        if timers.seconds["embed"]
        else None,
        "extract_ms_per_mb": {
            k: round(1000 * v["seconds"] / (v["input_bytes"] / 1e6), 1)
            for k, v in sorted(timers.by_kind.items())
            if v["input_bytes"]
        },
    }


async def run_once(
    model: Embedder, folder: Path, files: list[tuple[str, bytes]], batch: int
) -> dict[str, Any]:
    """`files` ingested into a new vector store (auto chunking) with `batch` texts per model call, timed."""
    timers = Timers()
    chunk_vectors.BATCH, served = batch, chunk_vectors.BATCH
    try:
        async with vector_store_service(folder, TimedEmbedder(model, timers)) as service:
            with timed(timers):
                done = await ingest(service, files)
    finally:
        chunk_vectors.BATCH = served
    if done.counts.completed != len(files):
        raise RuntimeError(f"not every file was ingested: {done.counts}")
    return summarize(timers, len(files), sum(len(d) for _, d in files), done.wall_s)


async def bench(quick: bool, batch_sizes: list[int]) -> dict[str, Any]:
    machine = machine_info()
    files = corpus(quick)
    text_files = [f for f in files if f[0].endswith(".txt")]
    async with embedding_model() as (model, dtype, load_s):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for i, b in enumerate([chunk_vectors.BATCH, *batch_sizes]):  # warm-up: each batch size once
                await run_once(model, folder / f"warm-{i}", text_files[:1], b)
            main = await run_once(model, folder / "main", files, chunk_vectors.BATCH)
            batches = {
                str(b): await run_once(model, folder / f"batch-{b}", text_files, b) for b in batch_sizes
            }
    return {
        "machine": machine,
        "model": model.model_name,
        "dtype": dtype,
        "load_s": round(load_s, 1),
        "config": {
            "chunking": "auto (800 / 400 tokens)",
            "served_batch": chunk_vectors.BATCH,
            "quick": quick,
        },
        "all_kinds": main,
        "batch_sizes": {
            b: {
                k: r[k]
                for k in (
                    "files",
                    "chunks",
                    "windows",
                    "model_calls",
                    "wall_s",
                    "windows_per_s",
                    "chunks_per_s",
                )
            }
            for b, r in batches.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--batch-sizes", default="16,64,256", help="texts per model call to compare (txt files)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few files of each kind, mostly small; batch sizes 16 and 64"
    )
    parser.add_argument("--out", default=str(REPO / "bench-results"))
    ns = parser.parse_args()
    sizes = [16, 64] if ns.quick else [int(s) for s in ns.batch_sizes.split(",")]
    data = asyncio.run(bench(ns.quick, sizes))
    print("wrote", write_json(ns.out, "ingestion-quick" if ns.quick else "ingestion", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

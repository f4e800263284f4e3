"""Retrieval quality of the vector, keyword and hybrid searches on a public corpus with known answers that ships
with CPython, through the server's own ingestion and search (the embedded all-MiniLM-L6-v2, auto chunking,
`VectorSearch` over the SQLite index).

Corpus: the Python Language Reference's sections that `help()` shows, `pydoc_data/topics.py` (one file per
section, named by its label: `assert`, `augassign`, `typesmapping`, ...).
Queries and judgements: `help()`'s own index of that corpus, `pydoc.Helper`:
  topics    each topic name (`AUGMENTEDASSIGNMENT`, `TRUTHVALUE`) as words ("augmented assignment", "truth value":
            split into the fewest words of the corpus's vocabulary), the section it shows relevant (gain 2) and
            the sections of the topics and keywords it cross-references relevant (gain 1); a topic that is
            another's alias (`MAPPINGS` -> `DICTIONARIES`) judged as that one
  keywords  each Python keyword (`nonlocal`, `yield`) with its section and cross-references, judged the same way
  symbols   each operator or delimiter (`**`, `+=`, `@`): mostly no word at all, so little for the keyword search
A query that appears in its own section word for word (case and spacing aside) is `verbatim`; every figure is
given for all queries and for the others only. A search keeps the 50 best chunks (the most `max_num_results`
allows); a section's rank is where its first chunk is. Per ranking: nDCG@10 (gains 2 / 1), recall@10 (of all
relevant sections), MRR (of the section shown, 0 past the 50 chunks) and `shown_at_10` (that section in the
first 10), means over the queries.
Rankings (`ranking_options`): vector (`ranker: "none"`), keyword (`hybrid_search` weights 0 / 1), hybrid
reciprocal rank fusion (the default, 1 / 1) and two weighted fusions (0.75 / 0.25 and 0.25 / 0.75).

Run: `python scripts/bench_retrieval_quality.py [--quick] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, machine_info, write_json
from retrievallib import PROJECT, embedding_model, ingest, vector_store_service

from vllm_responses.retrieval.ranking import Ranking

__all__ = ["RANKINGS", "Query", "documents", "metrics", "queries", "segment"]

RANKINGS = {
    "vector": Ranking(ranker="none"),
    "keyword": Ranking(embedding_weight=0.0, text_weight=1.0),
    "hybrid_rrf": Ranking(),
    "weighted_vector_0.75": Ranking(embedding_weight=0.75, text_weight=0.25),
    "weighted_keyword_0.75": Ranking(embedding_weight=0.25, text_weight=0.75),
}
CHUNKS = 50  # chunks a search keeps: the most `max_num_results` allows
TOP = 10
QUICK_DOCS = 24
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Query:
    """One query: its set, its text, the section `help()` shows for it and each relevant section's gain."""

    kind: str
    source: str
    text: str
    shown: str
    gains: dict[str, int] = field(hash=False)
    verbatim: bool = False


def documents() -> dict[str, str]:
    """The corpus: each `help()` section's label and text."""
    from pydoc_data.topics import topics

    return dict(sorted(topics.items()))


def segment(name: str, vocabulary: set[str]) -> str:
    """`name` (one word of capitals) as the fewest words of `vocabulary` that spell it, joined by spaces; the name
    itself, lower-cased, where no split does."""
    s = name.lower()
    best: list[list[str] | None] = [[]] + [None] * len(s)
    for end in range(1, len(s) + 1):
        for start in range(end):
            before = best[start]
            if before is not None and s[start:end] in vocabulary:
                if best[end] is None or len(before) + 1 < len(best[end] or []):
                    best[end] = [*before, s[start:end]]
    return " ".join(best[-1] or [s])


def _target(ref: str, seen: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """A `help()` topic or keyword resolved to (the section it shows, the names it cross-references)."""
    import pydoc

    entry = pydoc.Helper.topics.get(ref) or pydoc.Helper.keywords.get(ref)
    if not entry or ref in seen:
        return None
    if isinstance(entry, str):  # an alias of another topic or keyword
        return _target(entry.split()[0], seen | {ref})
    return entry


def _gains(shown: str, related: Iterable[str], corpus: Mapping[str, str]) -> dict[str, int]:
    gains = {shown: 2}
    for ref in related:
        target = _target(ref)
        if target is not None and target[0] in corpus:
            gains.setdefault(target[0], 1)
    return {label: g for label, g in gains.items() if label in corpus}


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def queries(corpus: Mapping[str, str]) -> list[Query]:
    """The three sets of queries, each judged against `corpus` (see the module docstring); a query whose section
    is not in `corpus` is left out."""
    import pydoc

    vocabulary = {w for text in corpus.values() for w in _WORD.findall(text.lower()) if len(w) > 1}
    out = []
    sources = [
        *(("topics", name, segment(name, vocabulary)) for name in pydoc.Helper.topics),
        *(("keywords", name, name) for name in pydoc.Helper.keywords),
    ]
    for kind, name, text in sources:
        target = _target(name)
        if target is not None and target[0] in corpus:
            out.append(Query(kind, name, text, target[0], _gains(target[0], target[1].split(), corpus)))
    for symbol, refs in pydoc.Helper.symbols.items():
        first, *rest = refs.split()
        target = _target(first)
        if target is not None and target[0] in corpus:
            related = [*target[1].split(), *rest]
            out.append(Query("symbols", symbol, symbol, target[0], _gains(target[0], related, corpus)))
    return [
        Query(q.kind, q.source, q.text, q.shown, q.gains, _normal(q.text) in _normal(corpus[q.shown]))
        for q in out
    ]


def metrics(ranked: list[str], query: Query) -> dict[str, float]:
    """One query's figures from the sections in the order first found (see the module docstring)."""
    top = ranked[:TOP]
    dcg = sum(query.gains.get(label, 0) / math.log2(i + 2) for i, label in enumerate(top))
    ideal = sorted(query.gains.values(), reverse=True)[:TOP]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    rank = ranked.index(query.shown) + 1 if query.shown in ranked else None
    return {
        "ndcg_at_10": dcg / idcg,
        "recall_at_10": len(set(top) & set(query.gains)) / len(query.gains),
        "mrr": 1 / rank if rank else 0.0,
        "shown_at_10": 1.0 if rank is not None and rank <= TOP else 0.0,
    }


def mean_figures(rows: list[dict[str, float]]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    return {"n": len(rows), **{k: round(sum(r[k] for r in rows) / len(rows), 3) for k in rows[0]}}


async def bench(quick: bool) -> dict[str, Any]:
    machine = machine_info()
    corpus = documents()
    if quick:  # the smallest sections: a few chunks, the queries that they answer
        corpus = dict(sorted(corpus.items(), key=lambda kv: len(kv[1]))[:QUICK_DOCS])
    asked = queries(corpus)
    by_query: list[dict[str, Any]] = []
    async with embedding_model() as (model, dtype, load_s):
        with tempfile.TemporaryDirectory() as tmp:
            async with vector_store_service(Path(tmp), model) as service:
                files = [(f"{label}.txt", text.encode()) for label, text in corpus.items()]
                done = await ingest(service, files)
                if done.counts.completed != len(files):
                    raise RuntimeError(f"not every file was ingested: {done.counts}")
                label_of = {file_id: name.removesuffix(".txt") for name, file_id in done.file_ids.items()}
                chunks = 0
                for file_id in label_of:
                    chunks += len(await service.index.file_chunks(done.vector_store_id, file_id))
                for q in asked:
                    row: dict[str, Any] = {"kind": q.kind, "source": q.source, "query": q.text}
                    row |= {"shown": q.shown, "verbatim": q.verbatim, "relevant": len(q.gains)}
                    for name, ranking in RANKINGS.items():
                        found = await service.searcher.search(
                            PROJECT, [done.vector_store_id], [q.text], ranking=ranking, max_num_results=CHUNKS
                        )
                        ranked = list(dict.fromkeys(label_of[f.hit.file_id] for f in found))
                        row[name] = metrics(ranked, q)
                    by_query.append(row)
    return {
        "machine": machine,
        "model": model.model_name,
        "dtype": dtype,
        "config": {"chunking": "auto (800 / 400 tokens)", "chunks_kept": CHUNKS, "quick": quick},
        "corpus": {
            "sections": len(corpus),
            "chunks": chunks,
            "mb": round(sum(map(len, corpus.values())) / 1e6, 3),
        },
        "ingest_s": round(done.wall_s, 1),
        "summary": summarize(by_query),
        "queries": by_query,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean figures per query set, all sets and the two of words, for all queries and the non-verbatim ones, per
    ranking."""
    out: dict[str, Any] = {}
    groups = {"all": ("topics", "keywords", "symbols"), "words": ("topics", "keywords")}
    for kind in ("all", "words", "topics", "keywords", "symbols"):
        picked = [r for r in rows if r["kind"] in groups.get(kind, (kind,))]
        out[kind] = {
            subset: {
                name: mean_figures([r[name] for r in picked if subset == "all" or not r["verbatim"]])
                for name in RANKINGS
            }
            for subset in ("all", "not_verbatim")
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=f"the {QUICK_DOCS} smallest sections only")
    parser.add_argument("--out", default=str(REPO / "bench-results"))
    ns = parser.parse_args()
    data = asyncio.run(bench(ns.quick))
    print("wrote", write_json(ns.out, "retrieval-quality-quick" if ns.quick else "retrieval-quality", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

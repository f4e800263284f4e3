"""First-event benchmark: how soon every stream of a burst hears back while most of them wait for admission.

One `vllm-responses serve` on the tiny model (its outputs forced) with few admission slots
(`--max-concurrent-responses`, 2) and a queue that holds the whole burst (`--max-queued-responses`); N streams
(32) start at once. Per stream: seconds from the request's sending to its first SSE event, which event that
was, whether it saw `response.queued`, and how it ended. Reported: the first event's p50/p95/max (and the
median of 5 lone streams', measured just before: the baseline), how many streams were queued, their endings,
and the server's own admission-wait histogram (/metrics). The target: every stream's first event within
50 ms. `--ours-tree PATH` runs our server from another source tree (`-P`: that path first), e.g. another
commit, to compare two versions on one machine. Loopback only. Run:
`python scripts/bench_first_event.py [--streams 32] [--slots 2] [--free] [--quick] [--ours-tree PATH] [--out DIR]`
(`--free`: answers not forced, so no per-request grammar check: what requests without structured outputs cost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    BenchError,
    HTTPStatusError,
    ServerProcess,
    engine_flags,
    exactly,
    free_port,
    get_text,
    machine_info,
    model_path,
    our_server_argv,
    percentile,
    post_sse,
    write_json,
)

__all__ = ["main"]

FORCED_TEXT = "one two three four five six seven eight nine ten"
ENDINGS = ("response.completed", "response.incomplete", "response.failed")
TARGET_MS = 50.0
LONE = 5  # lone streams measured before the burst


@dataclass
class Sample:
    """One stream: HTTP status, seconds to its first event, which it was, whether it was queued, its ending."""

    status: int = 0
    first_event_s: float | None = None
    first_event: str | None = None
    second_event: str | None = None
    queued: bool = False
    in_progress_s: float | None = None  # when `response.in_progress` came (admitted)
    total_s: float | None = None
    ending: str | None = None
    error: str | None = None


def request_body(model: str, i: int, forced: bool = True) -> dict[str, Any]:
    """Stream `i`'s request: its answer forced (a regex, which the server checks before the stream opens),
    or free (`forced=False`: what the random-weight model samples, 16 tokens, no grammar to check)."""
    body = {
        "model": model,
        "input": f"Count from one to ten in words ({i}).",
        "stream": True,
        "store": False,
        "temperature": 0,
        "max_output_tokens": 64 if forced else 16,
    }
    if forced:
        body["structured_outputs"] = [exactly(FORCED_TEXT)]
    return body


def _event_type(block: bytes) -> str:
    for line in block.split(b"\n"):
        if line.startswith(b"event:"):
            return line[6:].strip().decode()
    return ""


async def one_stream(port: int, body: dict[str, Any], timeout: float) -> Sample:
    sample = Sample()
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            async for block in post_sse(port, "/v1/responses", body):
                now, kind = time.perf_counter() - t0, _event_type(block)
                sample.status = 200
                if sample.first_event_s is None:
                    sample.first_event_s, sample.first_event = now, kind
                elif sample.second_event is None:
                    sample.second_event = kind
                sample.queued = sample.queued or kind == "response.queued"
                if kind == "response.in_progress":
                    sample.in_progress_s = now
                if kind in ENDINGS:
                    sample.ending = kind.removeprefix("response.")
    except HTTPStatusError as exc:
        sample.status, sample.error = exc.status, exc.body[:200]
    except (TimeoutError, BenchError, OSError) as exc:
        sample.error = f"{type(exc).__name__}: {exc}"[:200]
    sample.total_s = time.perf_counter() - t0
    return sample


def _ms(values: list[float], q: float) -> float | None:
    p = percentile(values, q)
    return round(p * 1000, 1) if p is not None else None


def summarize(samples: list[Sample], wall_s: float) -> dict[str, Any]:
    """The burst: first-event percentiles, queued streams, endings, and the checks."""
    first = [s.first_event_s for s in samples if s.first_event_s is not None]
    admitted = [s.in_progress_s for s in samples if s.in_progress_s is not None]
    endings: dict[str, int] = {}
    for s in samples:
        key = s.ending or (f"http {s.status}" if s.status not in (0, 200) else "no ending")
        endings[key] = endings.get(key, 0) + 1
    queued = [s for s in samples if s.queued]
    max_ms = round(max(first) * 1000, 1) if first else None
    return {
        "streams": len(samples),
        "first_event_ms": {"p50": _ms(first, 50), "p95": _ms(first, 95), "max": max_ms},
        "in_progress_ms": {"p50": _ms(admitted, 50), "p95": _ms(admitted, 95)},
        "queued": len(queued),
        "queued_opened_with_created_queued": sum(
            s.first_event == "response.created" and s.second_event == "response.queued" for s in queued
        ),
        "endings": endings,
        "errors": sorted({s.error for s in samples if s.error}),
        "wall_s": round(wall_s, 2),
        "checks": {
            "every_first_event_within_50ms": bool(first)
            and len(first) == len(samples)
            and max_ms <= TARGET_MS,
            "every_stream_completed": endings.get("completed", 0) == len(samples),
            "some_streams_queued": bool(queued),
        },
    }


async def burst(port: int, model: str, n: int, timeout: float, forced: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    samples = await asyncio.gather(
        *(one_stream(port, request_body(model, i, forced), timeout) for i in range(n))
    )
    return summarize(list(samples), time.perf_counter() - t0)


async def measure(port: int, model: str, n: int, timeout: float, forced: bool = True) -> dict[str, Any]:
    """Lone streams first, one after another (the baseline: nobody queued; their median), then the burst."""
    await burst(port, model, 2, timeout, forced)  # warm-up, not counted: the output constraint compiled once
    alone = [
        (await one_stream(port, request_body(model, i, forced), timeout)).first_event_s for i in range(LONE)
    ]
    return {
        "single_stream_first_event_ms": _ms([s for s in alone if s is not None], 50),
        **await burst(port, model, n, timeout, forced),
    }


def admission_wait(port: int) -> dict[str, float]:
    """The server's `vllm_responses_admission_wait_seconds` count and sum after the run (from /metrics)."""
    found: dict[str, float] = {}
    for line in get_text(port, "/metrics").splitlines():
        if line.startswith(
            ("vllm_responses_admission_wait_seconds_count", "vllm_responses_admission_wait_seconds_sum")
        ):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=32, help="streams started at once (at most 256)")
    ap.add_argument("--slots", type=int, default=2, help="--max-concurrent-responses")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one stream may take")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--ours-tree", default=None, help="our server from this source tree (e.g. a git archive)")
    ap.add_argument(
        "--free",
        action="store_true",
        help="answers not forced: no grammar for the server to check per request",
    )
    ap.add_argument("--quick", action="store_true", help="8 streams")
    ap.add_argument("--out", default="bench-results", help="folder for first_event.json and the server log")
    ns = ap.parse_args(argv)
    if ns.quick:
        ns.streams = 8
    if not 1 <= ns.streams <= 256:
        ap.error("--streams must be between 1 and 256")
    model = model_path("tiny")
    flags, env = engine_flags(model, max_model_len=ns.max_model_len)
    port = free_port()
    server_args = ["--max-concurrent-responses", str(ns.slots), "--max-queued-responses", str(ns.streams)]
    argv_ = our_server_argv(flags, port, *server_args, isolated=ns.ours_tree is not None)
    if ns.ours_tree is not None:
        env = {
            **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [ns.ours_tree, os.environ.get("PYTHONPATH")])),
        }
    result: dict[str, Any] = {
        "benchmark": "first_event",
        "machine": machine_info(),
        "config": {
            "model": "tiny",
            "engine_flags": flags,
            "server_args": server_args,
            "ours_tree": ns.ours_tree,
            "streams": ns.streams,
            "forced_outputs": not ns.free,
            "client": "this process: asyncio streams, hand-parsed SSE; all streams start at once; times from "
            "each request's sending",
            "quick": ns.quick,
        },
    }
    out = Path(ns.out)
    with ServerProcess("ours", argv_, port, env, out / "logs" / "first-event-ours.log") as server:
        result["server_ready_s"] = round(server.ready_s, 1)
        served = json.loads(get_text(port, "/v1/models"))["data"][0]["id"]
        result.update(asyncio.run(measure(port, served, ns.streams, ns.timeout, not ns.free)))
        result["admission_wait"] = admission_wait(port)
    path = write_json(ns.out, "first_event-quick" if ns.quick else "first_event", result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

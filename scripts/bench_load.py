"""Load benchmark: time to the first event and to the first token under 1 to 200 concurrent streams, code
turns mixed in (one in ten), on one `vllm-responses serve` with its sandbox pool (the tiny model's outputs are forced).

Each level starts its streams at once (closed: one request per stream) and waits for all to end. A plain
stream asks for a short text; a code stream offers the code interpreter and forces a call to it
(`tool_choice: {"type": "code_interpreter"}`), so its turn runs code in the sandbox and the model answers
after it. Per stream: seconds to the first SSE event (`response.created`), to the first generated token (the
first text or code delta), and in all; its HTTP status (429 when admission refuses it) and how it ended.
Per level: percentiles, endings, refusals, and the ratios of each level's medians to the single stream's,
measured in the same run (the baseline); and the sandbox pool's gauges from /metrics at the level's start
and end, with their extremes while it ran (idle and starting workers, calls waiting, containers), so that a
level that met a warm pool can be told from one that waited for starts. Bounded: at most `--max-streams` per
level, `--timeout` s each, loopback only. Run: `python scripts/bench_load.py [--model default|tiny|PATH] [--levels 1,10,50,100,200]
[--quick] [--server-args "--max-concurrent-responses 64"] [--out bench-results]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
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
    hermes_call,
    machine_info,
    model_path,
    our_server_argv,
    percentile,
    post_sse,
    ratio,
    write_json,
)

__all__ = ["main"]

TEXT_PROMPT = "Count from one to twenty in words."
CODE_PROMPT = "What is 17 * 23? Use Python to compute it."
# On the tiny (random-weight) model the outputs are forced with the `structured_outputs` extension: the
# text, and for a code turn the call (Hermes format) then the answer.
FORCED_TEXT = "one two three four five six seven eight nine ten"
FORCED_CODE = "print(17 * 23)"
FORCED_ANSWER = "17 * 23 = 391."
TOKEN_EVENTS = frozenset(
    {
        "response.output_text.delta",
        "response.code_interpreter_call_code.delta",
        "response.function_call_arguments.delta",
        "response.reasoning_text.delta",
    }
)
ENDINGS = ("response.completed", "response.incomplete", "response.failed")


@dataclass
class Sample:
    """One stream: code turn or not, HTTP status, seconds to first event / first token / end, its ending."""

    code: bool
    status: int = 0
    first_event_s: float | None = None
    first_token_s: float | None = None
    total_s: float | None = None
    ending: str | None = None
    retry_after: str | None = None
    error: str | None = None
    code_ran: bool = False  # a code stream saw its call completed (the sandbox ran it)
    response_id: str | None = None  # from `response.created` (bench_replicas retrieves it afterwards)


def request_body(model: str, code: bool, max_output_tokens: int, forced: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "input": CODE_PROMPT if code else TEXT_PROMPT,
        "stream": True,
        "store": False,
        "max_output_tokens": max_output_tokens,
        "temperature": 0,
    }
    if code:
        body["tools"] = [{"type": "code_interpreter", "container": {"type": "auto"}}]
        body["tool_choice"] = {"type": "code_interpreter"}
        body["max_output_tokens"] = 2 * max_output_tokens  # the call and the answer after it
    if forced:
        outputs = [hermes_call(FORCED_CODE), FORCED_ANSWER] if code else [FORCED_TEXT]
        body["structured_outputs"] = [exactly(text) for text in outputs]
        body["max_output_tokens"] = 256
    return body


async def one_stream(port: int, body: dict[str, Any], code: bool, timeout: float) -> Sample:
    sample = Sample(code=code)
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            async for block in post_sse(port, "/v1/responses", body):
                now = time.perf_counter() - t0
                sample.status = 200
                if sample.first_event_s is None:
                    sample.first_event_s = now
                kind = _event_type(block)
                if kind == "response.created":
                    sample.response_id = _created_id(block)
                if sample.first_token_s is None and kind in TOKEN_EVENTS:
                    sample.first_token_s = now
                if kind == "response.code_interpreter_call.completed":
                    sample.code_ran = True
                if kind in ENDINGS:
                    sample.ending = kind.removeprefix("response.")
    except HTTPStatusError as exc:
        sample.status, sample.retry_after = exc.status, exc.headers.get("retry-after")
        sample.error = exc.body[:200]
    except (TimeoutError, BenchError, OSError) as exc:
        sample.error = f"{type(exc).__name__}: {exc}"[:200]
    sample.total_s = time.perf_counter() - t0
    return sample


def _event_type(block: bytes) -> str:
    for line in block.split(b"\n"):
        if line.startswith(b"event:"):
            return line[6:].strip().decode()
    return ""


def _created_id(block: bytes) -> str | None:
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            return str(json.loads(line[5:])["response"]["id"])
    return None


def _ms(values: list[float], q: float) -> float | None:
    p = percentile(values, q)
    return round(p * 1000, 1) if p is not None else None


def summarize(samples: list[Sample], wall_s: float) -> dict[str, Any]:
    """Per level: percentiles of the admitted streams, endings, refusals, code turns."""
    admitted = [s for s in samples if s.status == 200]
    ttfe = [s.first_event_s for s in admitted if s.first_event_s is not None]
    ttft = [s.first_token_s for s in admitted if s.first_token_s is not None]
    endings: dict[str, int] = {}
    for s in admitted:
        key = s.ending or "no ending"
        endings[key] = endings.get(key, 0) + 1
    code = [s for s in admitted if s.code]
    code_total = [s.total_s for s in code if s.total_s is not None and s.ending == "completed"]
    return {
        "streams": len(samples),
        "admitted": len(admitted),
        "refused_429": sum(s.status == 429 for s in samples),
        "retry_after_on_every_429": all(s.retry_after for s in samples if s.status == 429),
        "other_errors": sorted({s.error or "" for s in samples if s.status not in (200, 429)}),
        "endings": endings,
        "code_turns": len(code),
        "code_turns_ran": sum(s.code_ran for s in code),
        "code_turns_completed": sum(s.ending == "completed" for s in code),
        "first_event_ms": {q: _ms(ttfe, float(q[1:])) for q in ("p50", "p90", "p99")},
        "first_event_ms_max": round(max(ttfe) * 1000, 1) if ttfe else None,
        "first_token_ms": {q: _ms(ttft, float(q[1:])) for q in ("p50", "p90", "p99")},
        "code_turn_ms": {q: _ms(code_total, float(q[1:])) for q in ("p50", "p95")},
        "code_turn_ms_max": round(max(code_total) * 1000, 1) if code_total else None,
        "wall_s": round(wall_s, 2),
    }


def code_streams(n: int, every: int) -> list[bool]:
    """Which of a level's `n` streams are code turns: one in `every` (and one of any small level above one,
    so that it has one); `every` 1: all of them, the single stream included."""
    if every <= 1:
        return [True] * n
    return [i % every == every - 1 or (n < every and i == n - 1 and n > 1) for i in range(n)]


async def run_level(
    port: int, model: str, n: int, max_output_tokens: int, timeout: float, forced: bool, code_every: int = 10
) -> dict[str, Any]:
    codes = code_streams(n, code_every)
    pool: dict[str, Any] = {"at_start": await asyncio.to_thread(pool_gauges, port)}
    watch = asyncio.create_task(_watch_pool(port, pool))
    t0 = time.perf_counter()
    try:
        samples = await asyncio.gather(
            *(one_stream(port, request_body(model, c, max_output_tokens, forced), c, timeout) for c in codes)
        )
    finally:
        watch.cancel()
    wall = time.perf_counter() - t0
    pool["at_end"] = end = await asyncio.to_thread(pool_gauges, port)
    if "started" in end and "started" in pool["at_start"]:
        pool["workers_started"] = end["started"] - pool["at_start"]["started"]  # during the level
    return {**summarize(list(samples), wall), "sandbox_pool": pool}


POOL_GAUGES = {
    'vllm_responses_sandbox_workers{state="idle"}': "idle",
    'vllm_responses_sandbox_workers{state="starting"}': "starting",
    "vllm_responses_sandbox_waiters": "waiters",
    "vllm_responses_sandbox_worker_waiters": "worker_waiters",
    "vllm_responses_sandbox_containers": "containers",
    "vllm_responses_sandbox_workers_started_total": "started",
}


def scrape(port: int) -> dict[str, float]:
    """The server's /metrics now, each sample's name (with its labels) to its value ({} when unreachable)."""
    try:
        text = get_text(port, "/metrics")
    except OSError:
        return {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def pool_gauges(port: int) -> dict[str, float]:
    """The sandbox pool's gauges now (from /metrics): idle and starting workers, calls waiting for room and
    for a worker's start, containers, and the count of workers started so far."""
    return {POOL_GAUGES[name]: value for name, value in scrape(port).items() if name in POOL_GAUGES}


async def _watch_pool(port: int, pool: dict[str, Any], every_s: float = 1.0) -> None:
    """While a level runs, once a second (a scrape costs the server some CPU): the most calls seen waiting
    (for room, for a start), workers starting and containers, and the fewest idle workers (so a reader can
    tell a level that met a warm pool from one that waited for starts)."""
    peaks = pool.setdefault("during", {})
    while True:
        # Not as the level's streams arrive: a scrape then would delay their first events.
        await asyncio.sleep(every_s)
        now = await asyncio.to_thread(pool_gauges, port)
        for key, value in now.items():
            if key == "started":
                continue
            pick, name = (min, "idle_min") if key == "idle" else (max, f"{key}_max")
            peaks[name] = pick(peaks.get(name, value), value)


def compare(levels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each level's medians over the single stream's (the baseline of this run), and the checks."""
    base = levels[min(levels, key=int)]
    ratios = {
        n: {
            "first_event_p50": ratio(lv["first_event_ms"]["p50"], base["first_event_ms"]["p50"]),
            "first_token_p50": ratio(lv["first_token_ms"]["p50"], base["first_token_ms"]["p50"]),
            "code_turn_p50": ratio(lv["code_turn_ms"]["p50"], base["code_turn_ms"]["p50"]),
            "code_turn_max": ratio(lv["code_turn_ms_max"], base["code_turn_ms"]["p50"]),
        }
        for n, lv in levels.items()
    }
    checks = {
        "first_event_p90_le_50ms_every_level": all(
            (lv["first_event_ms"]["p90"] or 1e9) <= 50 for lv in levels.values()
        ),
        "no_admitted_stream_failed": all(
            lv["endings"].get("failed", 0) == 0 and lv["endings"].get("no ending", 0) == 0
            for lv in levels.values()
        ),
        "every_code_turn_ran": all(lv["code_turns_ran"] == lv["code_turns"] for lv in levels.values()),
    }
    if base["code_turn_ms"]["p50"] is not None:  # the single stream was a code turn (--code-every 1)
        checks["no_code_turn_over_3x_the_single"] = all(
            (r["code_turn_max"] or 0) <= 3 for r in ratios.values()
        )
    return {"ratios_to_single_stream": ratios, "checks": checks}


async def measure(
    port: int,
    model: str,
    levels: list[int],
    max_output_tokens: int,
    timeout: float,
    forced: bool,
    code_every: int = 10,
) -> dict[str, Any]:
    # Warm-up, not counted: the first code run and the output constraints compiled once.
    await run_level(port, model, 2, max_output_tokens, timeout, forced)
    out: dict[str, dict[str, Any]] = {}
    for n in levels:
        out[str(n)] = await run_level(port, model, n, max_output_tokens, timeout, forced, code_every)
        print(f"level {n}: {json.dumps(out[str(n)])}", file=sys.stderr, flush=True)
    return {"levels": out, **compare(out)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default", help="default (SmolLM2-135M), tiny, or a path")
    ap.add_argument("--levels", default="1,10,50,100,200", help="concurrent streams per level")
    ap.add_argument("--max-streams", type=int, default=200, help="the bound on any level")
    ap.add_argument("--max-output-tokens", type=int, default=32, help="per text stream (code: twice)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one stream may take")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2, help="warm sandbox workers")
    ap.add_argument("--server-args", default="", help="extra flags of ours (quoted)")
    ap.add_argument("--engine-args", default="", help="extra vLLM engine flags (quoted)")
    ap.add_argument(
        "--code-every", type=int, default=10, help="one stream in this many is a code turn (1: every one)"
    )
    ap.add_argument("--quick", action="store_true", help="the tiny model, levels 1 and 4, 16 tokens")
    ap.add_argument("--out", default="bench-results", help="folder for load.json and the server log")
    ns = ap.parse_args(argv)
    if ns.quick:
        ns.model, ns.levels, ns.max_output_tokens = "tiny", "1,4", 16
    levels = [int(x) for x in ns.levels.split(",") if x.strip()]
    if not levels or min(levels) < 1 or max(levels) > ns.max_streams:
        ap.error(f"--levels must be between 1 and --max-streams ({ns.max_streams})")
    model = model_path(ns.model)
    flags, env = engine_flags(model, max_model_len=ns.max_model_len, extra=ns.engine_args)
    flags = [f for f in flags if f != "--disable-log-stats"]  # /metrics keeps vLLM's figures
    port = free_port()
    argv_ = our_server_argv(flags, port, *shlex.split(ns.server_args), sandbox_workers=ns.workers)
    if ns.model == "tiny":
        argv_ += ["--tool-call-parser", "hermes"]
    result: dict[str, Any] = {
        "benchmark": "load",
        "machine": machine_info(),
        "config": {
            "model": ns.model,
            "model_path": model,
            "engine_flags": flags,
            "server_args": ns.server_args,
            "workers": ns.workers,
            "levels": levels,
            "max_output_tokens": ns.max_output_tokens,
            "code_share": f"one stream in {ns.code_every} forces a code-interpreter call",
            "forced_outputs": ns.model == "tiny",
            "client": "this process: asyncio streams, hand-parsed SSE; all streams of a level start at once",
            "quick": ns.quick,
        },
    }
    out = Path(ns.out)
    with ServerProcess("ours", argv_, port, env, out / "logs" / "load-ours.log") as server:
        result["server_ready_s"] = round(server.ready_s, 1)
        served = json.loads(get_text(port, "/v1/models"))["data"][0]["id"]
        forced = ns.model == "tiny"
        result.update(
            asyncio.run(
                measure(port, served, levels, ns.max_output_tokens, ns.timeout, forced, ns.code_every)
            )
        )
        result["metrics_sample"] = _metrics_sample(port)
    path = write_json(ns.out, "load-quick" if ns.quick else "load", result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


def _metrics_sample(port: int) -> dict[str, float]:
    """A few of the server's own counters after the run (from /metrics), when it has them."""
    keep = ("vllm_responses_responses_total", "vllm_responses_admission_rejected_total")
    return {name: value for name, value in scrape(port).items() if name.startswith(keep)}


if __name__ == "__main__":
    sys.exit(main())

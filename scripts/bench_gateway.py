"""Gateway benchmark: raw AsyncLLM, our server and vLLM's own server on one engine configuration, streamed.

Targets, one after another in one run (one engine at a time; `--interleave`: all engines up at once and
the rounds of the targets alternated, fairer on a shared machine), with the same engine flags and prompt:
  raw             AsyncLLM.generate in this process (the limit: no HTTP, no parsing);
  ours            `python -m vllm_responses serve` (child process), POST /v1/responses, stream;
  vllm_responses  `python -m vllm.entrypoints.openai.api_server` (child process), POST /v1/responses;
  vllm_chat       the same vLLM server, POST /v1/chat/completions (alternated with vllm_responses).
Fixed output length (`--length regex`, the default): every target gets max_tokens=N and the same
structured-outputs regex, which cannot be complete before N tokens, so end-of-text is masked and all do
the same engine work (our server has no `ignore_eos`; the others also get `ignore_eos`). `--length eos`
instead sends `ignore_eos` (and `min_tokens` for chat) where accepted and leaves ours unconstrained.
Load client: this process, plain asyncio streams (see `benchlib.post_sse`); closed loop, all streams of a
round start together. Each server target also reports its main process's CPU ms per 1000 output tokens
(read from /proc around each round: far less sensitive to a busy machine than tok/s). `--ours-tree
NAME=PATH` adds our server from another source tree as target `ours@NAME`: with `--interleave`, an A/B
test of two versions in one run. Run: `python scripts/bench_gateway.py [--model tiny|default|PATH] [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    BenchError,
    ServerProcess,
    engine_flags,
    free_port,
    machine_info,
    model_path,
    our_server_argv,
    percentile,
    post_sse,
    ratio,
    write_json,
)

__all__ = ["main"]

PROMPT = "Tell me a long story about a cat."
TARGETS = ("raw", "ours", "vllm_responses", "vllm_chat")
CLIENT = "this process: asyncio streams, hand-parsed HTTP/1.1 chunked SSE (no httpx), closed loop"


@dataclass
class Sample:
    """One streamed request: seconds to the first text, seconds in all, output tokens, text deltas, error."""

    ttft: float | None = None
    total: float = 0.0
    tokens: int = 0
    deltas: int = 0
    error: str | None = None


Request = Callable[[], Awaitable[Sample]]


def length_regex(n: int) -> str:
    """Letters with single spaces, 20 n units: no vocabulary token covers 20 units ('[a-z ]' tokens of
    SmolLM2 are at most 19 characters), so the match cannot be complete within n tokens."""
    return f"(?:[a-z]| [a-z]){{{20 * n}}}"


async def timed(fn: Callable[[Sample, float], Awaitable[None]]) -> Sample:
    s = Sample()
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(600):
            await fn(s, t0)
    except Exception as exc:  # noqa: BLE001  # counted, reported, never fatal to the run
        s.error = f"{type(exc).__name__}: {exc}"[:300]
    s.total = time.perf_counter() - t0
    return s


def responses_request(port: int, body: dict[str, Any]) -> Request:
    async def go(s: Sample, t0: float) -> None:
        async for block in post_sse(port, "/v1/responses", body):
            if b"response.output_text.delta" in block:
                if s.ttft is None:
                    s.ttft = time.perf_counter() - t0
                s.deltas += 1
            elif b"response.completed" in block or b"response.incomplete" in block:  # N tokens: incomplete
                data = json.loads(block[block.index(b"data:") + 5 :])
                s.tokens = int(data["response"]["usage"]["output_tokens"])
            elif block.startswith((b"event: error", b"event: response.failed")) or (
                b'"type":"error"' in block or b'"type":"response.failed"' in block
            ):
                raise BenchError(block.decode(errors="replace")[:300])
        if s.tokens == 0:
            raise BenchError("the stream ended without response.completed or .incomplete")

    return lambda: timed(go)


def chat_request(port: int, body: dict[str, Any]) -> Request:
    async def go(s: Sample, t0: float) -> None:
        async for block in post_sse(port, "/v1/chat/completions", body):
            if b'"content":"' in block and b'"content":""' not in block:
                if s.ttft is None:
                    s.ttft = time.perf_counter() - t0
                s.deltas += 1
            if b'"usage":{' in block:
                s.tokens = int(json.loads(block[block.index(b"data:") + 5 :])["usage"]["completion_tokens"])
            elif block.startswith(b'data: {"error"') or b'"object":"error"' in block:
                raise BenchError(block.decode(errors="replace")[:300])

    return lambda: timed(go)


def server_cpu(server: ServerProcess) -> Callable[[], float]:
    """User + system CPU seconds so far of the server's main process (not its engine-core child)."""

    def read() -> float:
        assert server.proc is not None
        fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    return read


async def measure(
    requests: dict[str, Request], levels: list[int], repeats: int, n: int, cpu: dict[str, Callable[[], float]]
) -> dict[str, Any]:
    """Warm up, then per level `repeats` rounds of `c` concurrent streams per label (labels alternate);
    `cpu` reads a label's server CPU seconds, taken around each of its rounds."""
    for c in levels:  # the first batches of a new size are slow (CPU kernels, grammar compile)
        for fn in requests.values():
            await asyncio.gather(*(fn() for _ in range(c)))
    out: dict[str, Any] = {label: {} for label in requests}
    for c in levels:
        got: dict[str, tuple[list[Sample], list[float], list[float]]] = {
            label: ([], [], []) for label in requests
        }
        for rep in range(repeats):
            order = list(requests.items()) if rep % 2 == 0 else list(requests.items())[::-1]
            for label, fn in order:
                cpu0 = cpu[label]() if label in cpu else 0.0
                t = time.perf_counter()
                samples = await asyncio.gather(*(fn() for _ in range(c)))
                wall = time.perf_counter() - t
                tokens = sum(s.tokens for s in samples if not s.error)
                got[label][0].extend(samples)
                got[label][1].append(tokens / wall)
                if label in cpu and tokens:
                    got[label][2].append((cpu[label]() - cpu0) * 1e6 / tokens)
        for label, (samples, totals, cpu_ms) in got.items():
            out[label][str(c)] = summarize(samples, totals, n, cpu_ms)
    return out


def summarize(samples: list[Sample], totals: list[float], n: int, cpu_ms: list[float]) -> dict[str, Any]:
    ok = [s for s in samples if not s.error and s.ttft is not None]
    ttft = [s.ttft for s in ok if s.ttft is not None]
    rates = [s.tokens / (s.total - s.ttft) for s in ok if s.ttft is not None and s.total > s.ttft]

    def p(q: float) -> float | None:
        v = percentile(ttft, q)
        return round(v, 4) if v is not None else None

    return {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "error_examples": sorted({s.error for s in samples if s.error})[:3],
        "ttft_p50_s": p(50),
        "ttft_p95_s": p(95),
        "total_tok_s": round(statistics.median(totals), 1) if totals else None,
        "per_stream_tok_s": round(statistics.median(rates), 1) if rates else None,
        "tokens_min": min((s.tokens for s in ok), default=0),
        "tokens_max": max((s.tokens for s in ok), default=0),
        "short": sum(s.tokens < n for s in ok),
        "tokens_per_delta": round(sum(s.tokens for s in ok) / max(1, sum(s.deltas for s in ok)), 2),
        # Server main-process CPU ms per 1000 output tokens, per round (clock ticks: 10 ms steps).
        "server_cpu_ms_per_1k_tok": round(statistics.median(cpu_ms), 1) if cpu_ms else None,
        "server_cpu_ms_per_1k_tok_rounds": [round(x, 1) for x in cpu_ms],
    }


@asynccontextmanager
async def open_raw(
    model: str, flags: list[str], n: int, length: str
) -> AsyncIterator[tuple[dict[str, Request], float]]:
    """Target (a): AsyncLLM in this process, the chat-templated prompt, DELTA outputs."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams
    from vllm.v1.engine.async_llm import AsyncLLM

    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace

    args = engine_args_from_namespace(add_engine_cli_args(argparse.ArgumentParser()).parse_args(flags), model)
    t0 = time.monotonic()
    llm = await asyncio.to_thread(AsyncLLM.from_engine_args, args)
    ready = time.monotonic() - t0
    try:
        prompt = llm.get_tokenizer().apply_chat_template(
            [{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True
        )
        so = StructuredOutputsParams(regex=length_regex(n)) if length == "regex" else None
        params = SamplingParams(
            max_tokens=n,
            ignore_eos=True,
            temperature=0.0,
            structured_outputs=so,
            output_kind=RequestOutputKind.DELTA,
        )
        ids = iter(range(10**9))

        async def go(s: Sample, t0: float) -> None:
            async for out in llm.generate(prompt, params, f"raw-{next(ids)}"):
                got = len(out.outputs[0].token_ids)
                if got and s.ttft is None:
                    s.ttft = time.perf_counter() - t0
                s.tokens += got
                s.deltas += 1 if got else 0

        yield {"raw": lambda: timed(go)}, ready
    finally:
        llm.shutdown()


def start_server(
    which: str,
    model: str,
    flags: list[str],
    env: dict[str, str],
    n: int,
    length: str,
    logs: Path,
    tree: tuple[str, str] | None = None,
) -> tuple[ServerProcess, dict[str, Request]]:
    """Targets (b) and (c): the server (not yet started: enter it) and its request functions. `tree`
    (name, path): our server from another source tree (`-P`: the path, not this checkout, comes first)."""
    port = free_port()
    common = {"model": model, "stream": True, "temperature": 0.0, "store": False}
    regex = {"structured_outputs": {"regex": length_regex(n)}} if length == "regex" else {}
    if which == "ours":
        argv = our_server_argv(flags, port, isolated=tree is not None)
        body = {**common, "input": PROMPT, "max_output_tokens": n, **regex}
        if tree:
            which = f"ours@{tree[0]}"
            env = {
                **env,
                "PYTHONPATH": os.pathsep.join(filter(None, [tree[1], os.environ.get("PYTHONPATH")])),
            }
        requests = {which: responses_request(port, body)}
    else:
        argv = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            *flags,
            "--port",
            str(port),
            "--uvicorn-log-level",
            "warning",
        ]
        resp = {**common, "input": PROMPT, "max_output_tokens": n, "ignore_eos": True, **regex}
        chat = {
            **common,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": n,
            "ignore_eos": True,
            "min_tokens": n,
            "stream_options": {"include_usage": True},
            **regex,
        }
        requests = {"vllm_responses": responses_request(port, resp), "vllm_chat": chat_request(port, chat)}
    return ServerProcess(which, argv, port, env, logs / f"gateway-{which}.log"), requests


async def raw_and_measure(
    raw: bool,
    requests: dict[str, Request],
    ready: dict[str, float],
    cpu: dict[str, Callable[[], float]],
    model: str,
    flags: list[str],
    levels: list[int],
    repeats: int,
    n: int,
    length: str,
) -> dict:
    async with AsyncExitStack() as stack:
        if raw:
            reqs, ready["raw"] = await stack.enter_async_context(open_raw(model, flags, n, length))
            requests = {**reqs, **requests}
        levels_out = await measure(requests, levels, repeats, n, cpu)
    return {label: {"ready_s": round(ready[label], 1), "levels": lv} for label, lv in levels_out.items()}


def run_targets(
    chosen: list[str],
    interleave: bool,
    model: str,
    flags: list[str],
    env: dict[str, str],
    levels: list[int],
    repeats: int,
    n: int,
    length: str,
    logs: Path,
    trees: list[tuple[str, str]],
) -> dict[str, dict]:
    """One engine at a time (each target measured alone), or with `interleave` all engines up at once
    and the rounds of every target alternated (fairer on a shared machine, but N engines of memory).
    Each of `trees` adds a target `ours@NAME`: our server from that source tree."""
    args = (model, flags, levels, repeats, n, length)
    servers = [start_server(w, model, flags, env, n, length, logs) for w in ("ours", "vllm") if w in chosen]
    servers += [start_server("ours", model, flags, env, n, length, logs, tree) for tree in trees]
    cpu = {label: server_cpu(server) for server, reqs in servers for label in reqs}
    out: dict[str, dict] = {}
    if interleave:
        with ExitStack() as stack:
            requests, ready = {}, {}
            for server, reqs in servers:
                stack.enter_context(server)
                requests.update(reqs)
                ready.update(dict.fromkeys(reqs, server.ready_s))
            return asyncio.run(raw_and_measure("raw" in chosen, requests, ready, cpu, *args))
    if "raw" in chosen:
        out.update(asyncio.run(raw_and_measure(True, {}, {}, {}, *args)))
    for server, reqs in servers:
        with server:
            ready = dict.fromkeys(reqs, server.ready_s)
            out.update(asyncio.run(raw_and_measure(False, reqs, ready, cpu, *args)))
    return out


def compare(targets: dict[str, dict], levels: list[int]) -> dict[str, Any]:
    """Each target's ratio to raw per level, and the gateway's targets checked at the highest level."""
    ratios: dict[str, Any] = {}
    raw = targets.get("raw", {}).get("levels", {})
    for name, t in targets.items():
        if name == "raw":
            continue
        ratios[name] = {}
        for c, lv in t["levels"].items():
            base = raw.get(c, {})
            added = (
                (lv["ttft_p50_s"] - base["ttft_p50_s"]) * 1000
                if base.get("ttft_p50_s") and lv["ttft_p50_s"]
                else None
            )
            ratios[name][c] = {
                "total_tok_s": ratio(lv["total_tok_s"], base.get("total_tok_s")),
                "per_stream_tok_s": ratio(lv["per_stream_tok_s"], base.get("per_stream_tok_s")),
                "ttft_p50": ratio(lv["ttft_p50_s"], base.get("ttft_p50_s")),
                "ttft_p50_added_ms": round(added, 1) if added is not None else None,
            }
    top = str(max(levels))
    ours = ratios.get("ours", {}).get(top)
    checks: dict[str, Any] = {"level": int(top)}
    if ours:
        checks["tok_s_ge_97pct_of_raw"] = (ours["total_tok_s"] or 0) >= 0.97
        checks["ttft_p50_added_lt_5ms"] = (
            ours["ttft_p50_added_ms"] is not None and ours["ttft_p50_added_ms"] < 5
        )
        for peer in ("vllm_responses", "vllm_chat"):
            if peer in targets:
                mine, theirs = targets["ours"]["levels"][top], targets[peer]["levels"][top]
                checks[f"ahead_of_{peer}"] = bool(
                    (mine["total_tok_s"] or 0) > (theirs["total_tok_s"] or 0)
                    and (mine["ttft_p50_s"] or 1e9) < (theirs["ttft_p50_s"] or 1e9)
                )
    return {"ratios_to_raw": ratios, "checks": checks}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="tiny, default or a model path / name")
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated stream counts")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3, help="rounds per concurrency level and target")
    ap.add_argument(
        "--targets",
        default=None,
        help="raw, ours, vllm (both vLLM endpoints), or none (only the --ours-tree targets); "
        "default all, with --quick raw,ours",
    )
    ap.add_argument("--length", choices=["regex", "eos"], default="regex", help="fixed-length method")
    ap.add_argument(
        "--interleave",
        action="store_true",
        help="start every target's engine at once and alternate their rounds (memory: one engine each)",
    )
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--engine-args", default="", help="extra vLLM engine flags for every target (quoted)")
    ap.add_argument(
        "--ours-tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="also measure our server from the source tree PATH (e.g. a checkout of another commit)"
        " as target ours@NAME; repeatable; with --interleave, an A/B test in one run",
    )
    ap.add_argument("--quick", action="store_true", help="tiny model, 1 and 2 streams, 16 tokens, 1 round")
    ap.add_argument("--out", default="bench-results", help="folder for gateway-<model>.json and server logs")
    ns = ap.parse_args(argv)
    if ns.quick:  # two engine starts (raw, ours) unless --targets says otherwise: about a minute here
        ns.model, ns.concurrency, ns.max_tokens, ns.repeats = "tiny", "1,2", 16, 1
    levels = [int(c) for c in ns.concurrency.split(",")]
    trees = [(name, str(Path(path).resolve())) for name, _, path in (t.partition("=") for t in ns.ours_tree)]
    chosen = (ns.targets or ("raw,ours" if ns.quick else "raw,ours,vllm")).split(",")
    model = model_path(ns.model)
    flags, env = engine_flags(model, max_model_len=ns.max_model_len, extra=ns.engine_args)
    os.environ.update(env)
    out = Path(ns.out)
    logs = out / "logs"
    result: dict[str, Any] = {
        "benchmark": "gateway",
        "machine": machine_info(),
        "config": {
            "model": ns.model,
            "model_path": model,
            "engine_flags": flags,
            "env": env,
            "prompt": PROMPT,
            "max_tokens": ns.max_tokens,
            "concurrency": levels,
            "repeats": ns.repeats,
            "length": ns.length,
            "length_regex": length_regex(ns.max_tokens) if ns.length == "regex" else None,
            "client": CLIENT,
            "interleave": ns.interleave,
            "quick": ns.quick,
            "ours_trees": dict(trees),
        },
        "targets": {},
    }
    t0 = time.monotonic()
    result["targets"] = run_targets(
        chosen, ns.interleave, model, flags, env, levels, ns.repeats, ns.max_tokens, ns.length, logs, trees
    )
    result.update(compare(result["targets"], levels))
    result["wall_s"] = round(time.monotonic() - t0, 1)
    label = ns.model if ns.model in ("tiny", "default") else Path(model).name
    path = write_json(out, f"gateway-{label}" + ("-quick" if ns.quick else ""), result)
    print(json.dumps({k: result[k] for k in ("targets", "ratios_to_raw", "checks")}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

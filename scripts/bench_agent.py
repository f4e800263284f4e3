"""Agent-turn benchmark: a full code-interpreter turn through our server, split into engine, sandbox, gateway.

One turn: the model writes code (first engine call), the sandbox runs it, the model answers (second engine
call), streamed. With the tiny model both calls are forced by the `structured_outputs` extension (exact
code, exact answer); `--model default` lets SmolLM2 write what it will (the code tool forced).
The split is measured inside the server: it runs in a child process of this script (`--serve`, our CLI
with two wrappers) that logs, per call, the time spent awaiting the engine adapter's next event
(`VLLMEngine.generate`: vLLM plus our prompt rendering and tool-call parsing) and the time in
`WorkerPool.execute` (sandbox), on the shared monotonic clock. Gateway = client-side total - engine -
sandbox: HTTP, request handling, the agent loop, event building, storing and SSE writes. The client's
event timeline (`timeline`) is kept as a cross-check. The first turn creates a container from the warm
pool; later turns reuse it.
Run: `python scripts/bench_agent.py [--model tiny|default] [--turns 10] [--quick] [--out bench-results]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    BenchError,
    ServerProcess,
    engine_flags,
    exactly,
    free_port,
    hermes_call,
    machine_info,
    model_path,
    percentile,
    post_sse,
    write_json,
)

__all__ = ["main"]

CODE = 'import numpy as np\nprint("sum:", int(np.arange(10).sum()))'
ANSWER = "The sum of 0 to 9 is 45."
PROMPT = "Sum the numbers 0 to 9 with numpy, then tell me the result."
MARKS = {
    "created": b"event: response.created",
    "code_done": b"event: response.code_interpreter_call_code.done",
    "interpreting": b"event: response.code_interpreter_call.interpreting",
    "call_completed": b"event: response.code_interpreter_call.completed",
    "text_done": b"event: response.output_text.done",
}
PHASES = ("total_ms", "engine_ms", "sandbox_ms", "gateway_ms", "engine_calls")


async def turn(port: int, body: dict[str, Any], timings: Path) -> tuple[dict[str, float], str | None, str]:
    """One streamed turn: the split (ms), the container id and the output text."""
    t: dict[str, float] = {}
    container, text = None, ""
    timings.write_text("")
    t0 = time.perf_counter()
    async for block in post_sse(port, "/v1/responses", body):
        now = time.perf_counter()
        for name, mark in MARKS.items():
            if block.startswith(mark):
                t.setdefault(name, now)
        if block.startswith(b"event: response.output_item.done") and b'"code_interpreter_call"' in block:
            container = json.loads(block[block.index(b"data:") + 5 :])["item"].get("container_id")
        if block.startswith(b"event: response.output_text.done"):
            text = json.loads(block[block.index(b"data:") + 5 :])["text"]
        if block.startswith((b"event: response.failed", b"event: error")):
            raise BenchError(block.decode(errors="replace")[:400])
    total = time.perf_counter() - t0
    missing = [k for k in MARKS if k not in t]
    if missing:
        raise BenchError(f"the turn had no {missing} events (did the model call the code tool?)")
    await asyncio.sleep(0.05)  # the server logs a call's time as the call ends
    calls = [json.loads(line) for line in timings.read_text().splitlines() if line]
    engine = sum(c["busy"] for c in calls if c["kind"] == "engine")
    sandbox = sum(c["busy"] for c in calls if c["kind"] == "sandbox")
    parts = {
        "total_ms": total,
        "engine_ms": engine,
        "sandbox_ms": sandbox,
        "gateway_ms": total - engine - sandbox,
    }
    out = {k: round(v * 1000, 2) for k, v in parts.items()}
    out["engine_calls"] = sum(c["kind"] == "engine" for c in calls)
    out["timeline"] = {  # type: ignore[assignment]
        "to_created_ms": round((t["created"] - t0) * 1000, 2),
        "code_done_ms": round((t["code_done"] - t0) * 1000, 2),
        "sandbox_ms": round((t["call_completed"] - t["interpreting"]) * 1000, 2),
        "text_done_ms": round((t["text_done"] - t0) * 1000, 2),
    }
    return out, container, text


async def run_turns(port: int, model: str, forced: bool, turns: int, timings: Path) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "input": PROMPT,
        "stream": True,
        "temperature": 0.0,
        "store": False,
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "include": ["code_interpreter_call.outputs"],
        "max_output_tokens": 256,
    }
    if forced:
        body["structured_outputs"] = [exactly(hermes_call(CODE)), exactly(ANSWER)]
    else:
        body["tool_choice"] = {"type": "code_interpreter"}
    first, container, text = await turn(port, body, timings)
    body["tools"] = [{"type": "code_interpreter", "container": container}]
    runs = []
    for _ in range(turns):
        parts, _, text = await turn(port, body, timings)
        runs.append(parts)
    summary = {
        k: {
            "p50": round(percentile([r[k] for r in runs], 50) or 0, 2),
            "p90": round(percentile([r[k] for r in runs], 90) or 0, 2),
        }
        for k in PHASES
    }
    return {
        "first_turn_new_container": first,
        "warm_container": summary,
        "turns": len(runs),
        "answer": text,
        "answer_exact": text == ANSWER if forced else None,
    }


def serve(argv: list[str], timings: str) -> int:
    """Our CLI, with the engine adapter's and the sandbox pool's busy time logged per call to `timings`."""
    from interpreter_service.pool import WorkerPool
    from vllm_responses import cli
    from vllm_responses.engine.vllm import VLLMEngine

    def log(kind: str, busy: float) -> None:
        with open(timings, "a") as f:
            f.write(json.dumps({"kind": kind, "busy": busy}) + "\n")

    generate, execute = VLLMEngine.generate, WorkerPool.execute

    async def timed_generate(self: Any, request: Any) -> Any:
        busy = 0.0
        agen = generate(self, request)
        try:
            while True:
                t0 = time.perf_counter()
                try:
                    event = await agen.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    busy += time.perf_counter() - t0
                yield event
        finally:
            await agen.aclose()
            log("engine", busy)

    async def timed_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await execute(self, *args, **kwargs)
        finally:
            log("sandbox", time.perf_counter() - t0)

    VLLMEngine.generate = timed_generate  # type: ignore[method-assign]
    WorkerPool.execute = timed_execute  # type: ignore[method-assign]
    return cli.main(argv)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--serve"]:
        return serve(args[2:], args[1])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="tiny (forced, exact) or default / a path (free)")
    ap.add_argument("--turns", type=int, default=10, help="turns on the warm container after the first")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--engine-args", default="", help="extra vLLM engine flags (quoted)")
    ap.add_argument("--quick", action="store_true", help="tiny model, 2 turns")
    ap.add_argument("--out", default="bench-results", help="folder for agent.json and the server log")
    ns = ap.parse_args(args)
    if ns.quick:
        ns.model, ns.turns = "tiny", 2
    model = model_path(ns.model)
    flags, env = engine_flags(model, max_model_len=ns.max_model_len, extra=ns.engine_args)
    if ns.model == "tiny":
        flags += ["--tool-call-parser", "hermes"]
    port = free_port()
    out = Path(ns.out)
    timings = (out / "logs" / "agent-timings.jsonl").resolve()
    timings.parent.mkdir(parents=True, exist_ok=True)
    argv_ = [
        sys.executable,
        __file__,
        "--serve",
        str(timings),
        "serve",
        *flags,
        "--port",
        str(port),
        "--db",
        ":memory:",
        "--code-interpreter-workers",
        "1",
        "--log-level",
        "warning",
    ]
    result: dict[str, Any] = {
        "benchmark": "agent",
        "machine": machine_info(),
        "config": {
            "model": ns.model,
            "model_path": model,
            "engine_flags": flags,
            "forced": ns.model == "tiny",
            "quick": ns.quick,
            "code": CODE,
        },
    }
    with ServerProcess("ours", argv_, port, env, out / "logs" / "agent-ours.log") as server:
        result["server_ready_s"] = round(server.ready_s, 1)
        result.update(asyncio.run(run_turns(port, model, ns.model == "tiny", ns.turns, timings)))
    path = write_json(ns.out, "agent-quick" if ns.quick else "agent", result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

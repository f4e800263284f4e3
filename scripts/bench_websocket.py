"""WebSocket-mode benchmark: a client-side tool loop over one socket against the same loop over HTTP.

One loop is `--turns` responses: each turn the model calls a function tool (forced on the tiny model with the
`structured_outputs` extension), the client answers with a `function_call_output` continuing from the last
response, and the last turn answers in text. Over HTTP each turn is a streamed `POST /v1/responses` with
`previous_response_id` (stored: `store` true, as HTTP continuation needs); over WebSocket every turn is a
`response.create` on one socket with `store: false`, continued from the connection's cache. The two modes
run alternately (`--rounds` times each, on one server), and the report gives each loop's end-to-end time,
the per-turn times and the ratio WebSocket / HTTP.
A whole loop over HTTP runs first, uncounted, so that each turn's output constraint is compiled before
the rounds. Run: `python scripts/bench_websocket.py [--turns 20] [--rounds 5] [--quick] [--out bench-results]`.
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
    get_text,
    machine_info,
    model_path,
    our_server_argv,
    percentile,
    post_sse,
    ratio,
    write_json,
)

__all__ = ["main"]

MODEL = "tiny"
TOOL = {
    "type": "function",
    "name": "step",
    "description": "Advance the task by one step.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}
ANSWER = "All steps are done."
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def tool_call(n: int) -> str:
    return "<tool_call>\n" + json.dumps({"name": "step", "arguments": {"n": n}}) + "\n</tool_call>"


def turn_body(model: str, turn: int, turns: int, previous: dict[str, Any] | None) -> dict[str, Any]:
    """Turn `turn` (0-based) of a loop: the first asks, later ones answer the previous call."""
    last = turn == turns - 1
    body: dict[str, Any] = {
        "model": model,
        "tools": [TOOL],
        "max_output_tokens": 256,
        "temperature": 0.0,
        "structured_outputs": [exactly(ANSWER if last else tool_call(turn))],
    }
    if previous is None:
        body["input"] = f"Run {turns - 1} steps with the step tool, then say you are done."
    else:
        call = previous["output"][-1]
        body["previous_response_id"] = previous["id"]
        body["input"] = [{"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}]
    return body


def check_turn(response: dict[str, Any], turn: int, turns: int) -> None:
    if response.get("status") != "completed":
        raise BenchError(f"turn {turn} ended {response.get('status')}: {response.get('error')}")
    kind = response["output"][-1]["type"]
    if kind != ("message" if turn == turns - 1 else "function_call"):
        raise BenchError(f"turn {turn} produced a {kind}")


async def http_loop(port: int, model: str, turns: int) -> dict[str, Any]:
    previous: dict[str, Any] | None = None
    times, events = [], 0
    t0 = time.perf_counter()
    for turn in range(turns):
        body = {**turn_body(model, turn, turns, previous), "stream": True, "store": True}
        t = time.perf_counter()
        async for block in post_sse(port, "/v1/responses", body):
            events += 1
            kind, _, data = block.partition(b"\ndata: ")
            if kind.removeprefix(b"event: ").decode() in TERMINAL:
                previous = json.loads(data)["response"]
        times.append(time.perf_counter() - t)
        assert previous is not None
        check_turn(previous, turn, turns)
    return {"total_s": time.perf_counter() - t0, "turn_s": times, "events": events}


async def ws_loop(port: int, model: str, turns: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    previous: dict[str, Any] | None = None
    times, events = [], 0
    t0 = time.perf_counter()
    async with connect(f"ws://127.0.0.1:{port}/v1/responses", max_size=None) as ws:
        for turn in range(turns):
            body = {"type": "response.create", **turn_body(model, turn, turns, previous), "store": False}
            t = time.perf_counter()
            await ws.send(json.dumps(body))
            while True:
                event = json.loads(await ws.recv())
                events += 1
                if event["type"] == "error":
                    raise BenchError(f"turn {turn}: {event['error']}")
                if event["type"] in TERMINAL:
                    previous = event["response"]
                    break
            times.append(time.perf_counter() - t)
            assert previous is not None
            check_turn(previous, turn, turns)
    return {"total_s": time.perf_counter() - t0, "turn_s": times, "events": events}


def summarize(loops: list[dict[str, Any]]) -> dict[str, Any]:
    totals = [loop["total_s"] * 1000 for loop in loops]
    per_turn = [t * 1000 for loop in loops for t in loop["turn_s"]]
    return {
        "loop_ms": [round(t, 1) for t in totals],
        "loop_ms_p50": round(percentile(totals, 50) or 0, 1),
        "turn_ms_p50": round(percentile(per_turn, 50) or 0, 2),
        "turn_ms_p90": round(percentile(per_turn, 90) or 0, 2),
        "first_turn_ms_p50": round(percentile([loop["turn_s"][0] * 1000 for loop in loops], 50) or 0, 2),
        "events_per_loop": sorted({loop["events"] for loop in loops}),
    }


async def measure(port: int, model: str, turns: int, rounds: int) -> dict[str, Any]:
    # Warm-up, not counted: a whole loop compiles every turn's output constraint once (the engine caches
    # them), so that neither mode pays for it in the rounds.
    await http_loop(port, model, turns)
    await ws_loop(port, model, 2)
    loops: dict[str, list[dict[str, Any]]] = {"http": [], "websocket": []}
    for i in range(rounds):  # alternate, starting with each mode in turn
        order = ("http", "websocket") if i % 2 == 0 else ("websocket", "http")
        for mode in order:
            run = http_loop if mode == "http" else ws_loop
            loops[mode].append(await run(port, model, turns))
    http, ws = summarize(loops["http"]), summarize(loops["websocket"])
    return {
        "http": http,
        "websocket": ws,
        # Each round's pair, run back to back: steadier than the medians on a shared machine.
        "round_ratios_ws_over_http": [
            ratio(w, h) for w, h in zip(ws["loop_ms"], http["loop_ms"], strict=True)
        ],
        "ratio_ws_over_http_loop": ratio(ws["loop_ms_p50"], http["loop_ms_p50"]),
        "ratio_ws_over_http_turn": ratio(ws["turn_ms_p50"], http["turn_ms_p50"]),
        # The same work either way: as many events per loop, give or take a few deltas (item ids are random,
        # so prompts, and with them the tokens the forced text is cut into, differ slightly between loops).
        "checks": {
            "same_events_within_5pct": _spread([*http["events_per_loop"], *ws["events_per_loop"]]) <= 0.05
        },
    }


def _spread(values: list[int]) -> float:
    return (max(values) - min(values)) / min(values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=20, help="responses per loop (the last one answers in text)")
    ap.add_argument("--rounds", type=int, default=5, help="loops per mode, alternating")
    ap.add_argument("--max-model-len", type=int, default=4096, help="20 tool turns take ~2100 tokens")
    ap.add_argument("--engine-args", default="", help="extra vLLM engine flags (quoted)")
    ap.add_argument("--quick", action="store_true", help="4 turns, 1 round")
    ap.add_argument("--out", default="bench-results", help="folder for websocket.json and the server log")
    ns = ap.parse_args(argv)
    if ns.quick:
        ns.turns, ns.rounds = 4, 1
    if ns.turns < 2:
        ap.error("--turns must be at least 2")
    model = model_path(MODEL)
    flags, env = engine_flags(model, max_model_len=ns.max_model_len, extra=ns.engine_args)
    port = free_port()
    out = Path(ns.out)
    argv_ = our_server_argv(flags, port, "--tool-call-parser", "hermes")
    result: dict[str, Any] = {
        "benchmark": "websocket",
        "machine": machine_info(),
        "config": {
            "model": MODEL,
            "model_path": model,
            "engine_flags": flags,
            "turns": ns.turns,
            "rounds": ns.rounds,
            "quick": ns.quick,
            "http": "a streamed POST per turn (a new connection each), store true, previous_response_id",
            "websocket": "one socket, response.create per turn, store false, previous_response_id",
        },
    }
    with ServerProcess("ours", argv_, port, env, out / "logs" / "websocket-ours.log") as server:
        result["server_ready_s"] = round(server.ready_s, 1)
        served = json.loads(get_text(port, "/v1/models"))["data"][0]["id"]
        result.update(asyncio.run(measure(port, served, ns.turns, ns.rounds)))
    path = write_json(ns.out, "websocket-quick" if ns.quick else "websocket", result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

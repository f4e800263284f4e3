"""Input-handling benchmark: what reading a request's files costs the server, per source tree, in one run.

Each tree (`--tree NAME=PATH`, repeatable; default: this checkout) serves from a child process (`python -P`,
so the tree on PYTHONPATH is the one imported) with the scripted engine of its tests (tests/support/fakes.py, as a vision
model: no model runs, so the figures are the gateway's own work) and an in-memory store. The rounds alternate the trees;
each round sends, one after another, `--requests` of each kind:
  pdf        POST /v1/conversations, one item holding a 3-page PDF (file_data): its text extracted
  text       POST /v1/conversations, one item holding a 6-byte text file
  images     POST /v1/conversations, one item holding a 1x1 PNG (data URL): checked and counted
  response   POST /v1/responses, a plain text input (the scripted engine answers), store: false
  image_response  the same with a 1x1 PNG data URL beside the text: checked as a response's input image
Reported per tree and kind: latency p50 / p95 (ms) over all rounds, and the server process's CPU ms per
request (/proc/<pid>/stat around each kind's requests; PDF extraction workers are long-lived child processes
of their own and are not counted).
Run: `python scripts/bench_inputs.py [--tree before=PATH --tree after=PATH] [--quick]`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, BenchError, ServerProcess, free_port, machine_info, percentile, ratio, write_json

from tests.support.pdfs import make_pdf

_CHILD = """
import sys, uvicorn
from contextlib import asynccontextmanager
from tests.support.fakes import FakeEngine
from vllm_responses.api.app import build_app
from vllm_responses.config import Config
from vllm_responses.store.memory import MemoryStore

@asynccontextmanager
async def opener(config):
    store = MemoryStore()
    await store.open()
    try:
        engine = FakeEngine()
        engine.images = True  # a vision model: input_images are checked and kept
        yield engine, None, store
    finally:
        await store.aclose()

config = Config(port=int(sys.argv[1]), code_interpreter=False, db=":memory:")
uvicorn.run(build_app(config, opener), host="127.0.0.1", port=config.port, log_level="warning")
"""

_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _bodies() -> dict[str, tuple[str, dict[str, Any]]]:
    pdf = base64.b64encode(make_pdf(["First page.", "Second page.", "Third page."])).decode()

    def item(part: dict[str, Any]) -> dict[str, Any]:
        return {"items": [{"type": "message", "role": "user", "content": [part]}]}

    def response_input(part: dict[str, Any]) -> dict[str, Any]:
        return {"input": item(part)["items"]}

    return {
        "pdf": (
            "/v1/conversations",
            item(
                {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{pdf}"}
            ),
        ),
        "text": (
            "/v1/conversations",
            item({"type": "input_file", "filename": "a.txt", "file_data": "data:text/plain;base64,aGVsbG8K"}),
        ),
        "images": (
            "/v1/conversations",
            item({"type": "input_image", "image_url": f"data:image/png;base64,{_PNG}", "detail": "auto"}),
        ),
        "response": ("/v1/responses", {"model": "fake-model", "input": "hi", "store": False}),
        "image_response": (
            "/v1/responses",
            {
                "model": "fake-model",
                "store": False,
                **response_input({"type": "input_image", "image_url": f"data:image/png;base64,{_PNG}"}),
            },
        ),
    }


def _post(port: int, path: str, body: dict[str, Any]) -> float:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
    except urllib.error.HTTPError as exc:
        raise BenchError(f"{path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
    return time.perf_counter() - t0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` itself."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def _round(server: ServerProcess, bodies: dict[str, tuple[str, dict[str, Any]]], n: int, out: dict) -> None:
    assert server.proc is not None
    for kind, (path, body) in bodies.items():
        cpu0 = _cpu_s(server.proc.pid)
        out[kind]["s"].extend(_post(server.port, path, body) for _ in range(n))
        out[kind]["cpu_ms"].append((_cpu_s(server.proc.pid) - cpu0) * 1000 / n)


def _summary(samples: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float | None]]:
    def ms(v: float | None) -> float | None:
        return None if v is None else round(v * 1000, 2)

    return {
        kind: {
            "p50_ms": ms(percentile(s["s"], 50)),
            "p95_ms": ms(percentile(s["s"], 95)),
            "cpu_ms_per_request": round(sorted(s["cpu_ms"])[len(s["cpu_ms"]) // 2], 2),
        }
        for kind, s in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20, help="requests of each kind per round")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 5 (a smoke run)")
    parser.add_argument("--out", default=str(REPO / "bench-results"))
    ns = parser.parse_args()
    rounds, n = (2, 5) if ns.quick else (ns.rounds, ns.requests)
    trees = [(name, str(Path(path).resolve())) for name, _, path in (t.partition("=") for t in ns.tree)]
    trees = trees or [("this", str(REPO))]
    bodies = _bodies()
    servers = []
    for name, path in trees:
        port = free_port()
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))}
        argv = [sys.executable, "-P", "-c", _CHILD, str(port)]
        servers.append(ServerProcess(name, argv, port, env, Path(ns.out) / f"inputs-{name}.log"))
    samples = {name: {k: {"s": [], "cpu_ms": []} for k in bodies} for name, _ in trees}
    try:
        for server in servers:
            server.__enter__()
            _round(server, bodies, 2, {k: {"s": [], "cpu_ms": []} for k in bodies})  # warm-up
        for _ in range(rounds):
            for server in servers:
                _round(server, bodies, n, samples[server.name])
    finally:
        for server in servers:
            server.stop()
    results = {name: _summary(s) for name, s in samples.items()}
    first = trees[0][0]
    for name, kinds in results.items():
        for kind, figures in kinds.items():
            figures["p50_ratio_to_" + first] = ratio(figures["p50_ms"], results[first][kind]["p50_ms"])
            print(f"{name:>10} {kind:>9}: {figures}")
    data = {
        "machine": machine_info(),
        "trees": dict(trees),
        "rounds": rounds,
        "requests": n,
        "results": results,
    }
    print("wrote", write_json(ns.out, "inputs-quick" if ns.quick else "inputs", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

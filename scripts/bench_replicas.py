"""Load over two gateway replicas on one Postgres and one shared sandbox service, against one replica in the
same run: time to first event / first token / total, endings, and that no response is lost.

One run, all on 127.0.0.1: a throwaway Postgres (initdb / pg_ctl), one `python -m interpreter_service serve`
with a token, and `vllm-responses serve` replicas on the tiny model (outputs forced), each with `--db` the
Postgres URL and `--code-interpreter-url` the service. Phase "one": replica A alone takes every stream.
Phase "two": replica B is started beside A (same database, same service) and the streams of each level are
split round-robin over A and B. A level starts its streams at once (closed, one request each, `store: true`);
one stream in four (3 and 6 of each 8) forces a code call (`print(17 * 23)`) on the shared service. Between
the phases every container of the service is deleted and its warm workers refilled, so that phase two finds
the sandbox as phase one did. Afterwards every response id either phase created is retrieved
from BOTH replicas: it must be there with a terminal status, and a code turn's logs must hold `391`.
Bounded: at most `--max-streams` per level, `--timeout` s per stream. The request, the stream client and the
per-level summary are bench_load's. Run: `python scripts/bench_replicas.py [--levels 1,8,32] [--quick]
[--out bench-results]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import Sample, one_stream, request_body, summarize
from benchlib import (
    ServerProcess,
    engine_flags,
    free_port,
    get_text,
    machine_info,
    model_path,
    our_server_argv,
    percentile,
    ratio,
    write_json,
)
from pg_cluster import PostgresCluster

__all__ = ["main"]

TERMINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})
FORCED_VALUE = "391"  # what the forced code, print(17 * 23), prints


def level_codes(n: int) -> list[bool]:
    """Two streams in eight are code turns, at 3 and 6 (so that round-robin over two replicas gives each one
    of them), and the last of a level of 2 or 3 (so that it has one)."""
    return [i % 8 in (3, 6) or (1 < n < 4 and i == n - 1) for i in range(n)]


def targets(n: int, ports: list[int]) -> list[int]:
    """Round-robin over the replicas."""
    return [ports[i % len(ports)] for i in range(n)]


def timings(samples: list[Sample]) -> dict[str, Any]:
    """p50 / p95 in ms of first event, first token and total over the admitted streams."""
    admitted = [s for s in samples if s.status == 200]
    out: dict[str, Any] = {}
    for name, values in (
        ("first_event_ms", [s.first_event_s for s in admitted]),
        ("first_token_ms", [s.first_token_s for s in admitted]),
        ("total_ms", [s.total_s for s in admitted]),
    ):
        out[name] = _p50_p95(values)
    for kind, code in (("text", False), ("code", True)):  # where the tail comes from
        out[f"{kind}_streams_ms"] = {
            "first_token": _p50_p95([s.first_token_s for s in admitted if s.code is code]),
            "total": _p50_p95([s.total_s for s in admitted if s.code is code]),
        }
    return out


def _p50_p95(values: list[float | None]) -> dict[str, float | None]:
    xs = [v for v in values if v is not None]
    return {q: _ms(percentile(xs, float(q[1:]))) for q in ("p50", "p95")}


def _ms(v: float | None) -> float | None:
    return round(v * 1000, 1) if v is not None else None


async def run_level(
    ports: list[int], model: str, n: int, timeout: float
) -> tuple[dict[str, Any], list[Sample]]:
    codes = level_codes(n)
    where = targets(n, ports)
    bodies = [{**request_body(model, c, 32, forced=True), "store": True} for c in codes]
    t0 = time.perf_counter()
    samples = list(
        await asyncio.gather(
            *(one_stream(p, b, c, timeout) for p, b, c in zip(where, bodies, codes, strict=True))
        )
    )
    wall = time.perf_counter() - t0
    level = summarize(samples, wall)
    level.update(timings(samples))
    level["streams_per_replica"] = [where.count(p) for p in ports]
    level["streams_per_s"] = round(n / wall, 2)
    return level, samples


async def measure(
    ports: list[int], model: str, levels: list[int], timeout: float, phase: str
) -> tuple[dict[str, Any], list[Sample]]:
    await run_level(ports, model, 4 * len(ports), timeout)  # warm-up (a code turn on each), not counted
    out: dict[str, Any] = {}
    kept: list[Sample] = []
    for n in levels:
        out[str(n)], samples = await run_level(ports, model, n, timeout)
        kept += samples
        print(f"{phase} replica(s), level {n}: {json.dumps(out[str(n)])}", file=sys.stderr, flush=True)
    return out, kept


def check_kept(samples: list[Sample], ports: list[int]) -> dict[str, Any]:
    """Every admitted stream's response, retrieved from each replica: found, terminal, code logs hold 391."""
    admitted = [s for s in samples if s.status == 200]
    ids = [s for s in admitted if s.response_id]
    found = not_found = not_terminal = code_bad = 0
    statuses: dict[str, int] = {}
    for s in ids:
        for port in ports:
            path = f"/v1/responses/{s.response_id}?include[]=code_interpreter_call.outputs"
            try:
                resp = json.loads(get_text(port, path))
            except OSError:
                not_found += 1
                continue
            found += 1
            statuses[resp["status"]] = statuses.get(resp["status"], 0) + 1
            not_terminal += resp["status"] not in TERMINAL
            if s.code:
                logs = "".join(
                    o.get("logs", "")
                    for item in resp.get("output", [])
                    if item.get("type") == "code_interpreter_call"
                    for o in item.get("outputs") or []
                )
                code_bad += FORCED_VALUE not in logs
    return {
        "admitted": len(admitted),
        "without_id": len(admitted) - len(ids),
        "retrievals": found + not_found,
        "found": found,
        "not_found": not_found,
        "statuses_seen": statuses,
        "not_terminal": not_terminal,
        "code_retrievals_without_391": code_bad,
        "none_lost": len(ids) == len(admitted) and not_found == 0 and not_terminal == 0 and code_bad == 0,
    }


def compare(one: dict[str, Any], two: dict[str, Any]) -> dict[str, Any]:
    """Two replicas over one, per level, from the same run."""
    out: dict[str, Any] = {}
    for n in one:
        a, b = one[n], two[n]
        out[n] = {
            f"{m}_{q}": ratio(b[m][q], a[m][q])
            for m in ("first_event_ms", "first_token_ms", "total_ms")
            for q in ("p50", "p95")
        }
        out[n]["streams_per_s"] = ratio(b["streams_per_s"], a["streams_per_s"])
    return out


def reset_sandbox(url: str, token: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """Delete every container of the sandbox service and wait until its warm workers are back (none
    starting), so that a phase starts with the sandbox as the first one did. Returns what it found."""
    headers = {"Authorization": f"Bearer {token}"}

    def call(method: str, path: str) -> Any:
        req = urllib.request.Request(url + path, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    live = [c["id"] for c in call("GET", "/v1/containers")["data"]]
    for cid in live:
        call("DELETE", f"/v1/containers/{cid}")
    deadline = time.monotonic() + timeout_s
    while (health := call("GET", "/health"))["workers_starting"] and time.monotonic() < deadline:
        time.sleep(0.5)
    return {"containers_deleted": len(live), "workers_idle_after": health["workers_idle"]}


def replica_argv(flags: list[str], port: int, name: str, db: str, sandbox_url: str) -> list[str]:
    """bench's `serve` argv, on the Postgres store and the shared sandbox service instead of its own."""
    argv = our_server_argv(flags, port, "--tool-call-parser", "hermes", "--replica-id", name)
    argv = [a for a in argv if a != "--no-code-interpreter"]
    argv[argv.index(":memory:")] = db
    return [*argv, "--code-interpreter-url", sandbox_url]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,8,32", help="concurrent streams per level")
    ap.add_argument("--max-streams", type=int, default=64, help="the bound on any level")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one stream may take")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--sandbox-workers", type=int, default=2, help="the shared service's warm workers")
    ap.add_argument(
        "--sandbox-arg",
        action="append",
        default=[],
        help="one more flag for `interpreter_service serve` (repeat; e.g. --sandbox-arg=--spares=8)",
    )
    ap.add_argument("--quick", action="store_true", help="levels 1 and 4")
    ap.add_argument("--out", default="bench-results", help="folder for replicas.json and the logs")
    ns = ap.parse_args(argv)
    if ns.quick:
        ns.levels = "1,4"
    levels = [int(x) for x in ns.levels.split(",") if x.strip()]
    if not levels or min(levels) < 1 or max(levels) > ns.max_streams:
        ap.error(f"--levels must be between 1 and --max-streams ({ns.max_streams})")
    model = model_path("tiny")
    flags, env = engine_flags(model, max_model_len=ns.max_model_len)
    token = secrets.token_hex(16)
    logs = Path(ns.out) / "logs"
    result: dict[str, Any] = {
        "benchmark": "replicas",
        "machine": machine_info(),
        "config": {
            "model": "tiny",
            "engine_flags": flags,
            "levels": levels,
            "sandbox_workers": ns.sandbox_workers,
            "sandbox_args": ns.sandbox_arg,
            "code_share": "streams 3 and 6 of each 8 (one in four) force a code-interpreter call on the shared service",
            "store": "Postgres (throwaway initdb cluster, fsync off), store: true on every request",
            "phases": "one: replica A alone; two: A and B beside it, stream i on replica i mod 2; between "
            "them every sandbox container is deleted and the warm workers refilled",
            "client": "bench_load's: asyncio streams, hand-parsed SSE; all streams of a level start at once",
            "quick": ns.quick,
        },
    }
    sport = free_port()
    sandbox_argv = [sys.executable, "-m", "interpreter_service", "serve", "--host", "127.0.0.1"]
    sandbox_argv += ["--port", str(sport), "--workers", str(ns.sandbox_workers), *ns.sandbox_arg]
    sandbox_url = f"http://127.0.0.1:{sport}"
    replica_env = {**env, "VLLM_RESPONSES_CODE_INTERPRETER_TOKEN": token}
    pa, pb = free_port(), free_port()
    with (
        PostgresCluster() as pg,
        ServerProcess(
            "sandbox",
            sandbox_argv,
            sport,
            {"VR_INTERPRETER_TOKEN": token},
            logs / "replicas-sandbox.log",
            ready_headers={"Authorization": f"Bearer {token}"},
        ),
        ServerProcess(
            "replica-a",
            replica_argv(flags, pa, "a", pg.url(), sandbox_url),
            pa,
            replica_env,
            logs / "replica-a.log",
        ) as a,
    ):
        result["ready_s"] = {"a": round(a.ready_s, 1)}
        served = json.loads(get_text(pa, "/v1/models"))["data"][0]["id"]
        one, kept_one = asyncio.run(measure([pa], served, levels, ns.timeout, "one"))
        result["sandbox_reset_before_two"] = reset_sandbox(sandbox_url, token)  # as phase one found it
        argv_b = replica_argv(flags, pb, "b", pg.url(), sandbox_url)
        with ServerProcess("replica-b", argv_b, pb, replica_env, logs / "replica-b.log") as b:
            result["ready_s"]["b"] = round(b.ready_s, 1)
            two, kept_two = asyncio.run(measure([pa, pb], served, levels, ns.timeout, "two"))
            kept = {
                "one": check_kept(kept_one, [pa, pb]),
                "two": check_kept(kept_two, [pa, pb]),
            }
    result.update({"one_replica": one, "two_replicas": two, "kept": kept})
    result["ratios_two_over_one"] = compare(one, two)
    every = [*one.values(), *two.values()]
    result["checks"] = {
        "none_lost": all(k["none_lost"] for k in kept.values()),
        "no_admitted_stream_failed": all(
            lv["endings"].get("failed", 0) == 0 and lv["endings"].get("no ending", 0) == 0 for lv in every
        ),
        "every_code_turn_ran": all(lv["code_turns_ran"] == lv["code_turns"] for lv in every),
    }
    path = write_json(ns.out, "replicas-quick" if ns.quick else "replicas", result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

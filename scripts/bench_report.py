"""Turn the benchmarks' JSON into markdown tables and PNG plots, and write them into docs/benchmarks.md.

Reads `gateway-<model>.json` (or `gateway.json`), `interpreter.json`, `pool_burst.json` and `agent.json` from the results
folder; writes `docs/bench/*.png`; replaces the text between the `<!-- bench:begin -->` and
`<!-- bench:end -->` markers of docs/benchmarks.md (with `--write-doc`), else prints the markdown.
Run: `python scripts/bench_report.py [--results bench-results] [--write-doc]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO

__all__ = ["main", "render"]

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
LABELS = {
    "raw": "raw AsyncLLM",
    "ours": "ours /v1/responses",
    "vllm_responses": "vLLM /v1/responses",
    "vllm_chat": "vLLM /v1/chat/completions",
}


def _f(v: Any, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
    return "–" if v is None else f"{v * scale:.{digits}f}{unit}"


def machine_line(m: dict[str, Any]) -> str:
    v = m.get("versions", {})
    return (
        f"{m.get('date', '?')}; {m.get('cpu')} ({', '.join(m.get('cpu_flags', [])) or 'no AVX flags'}), "
        f"{m.get('cores')} cores, {m.get('mem_gib')} GiB{', GPU ' + m['gpu'] if m.get('gpu') else ''}; "
        f"load average {m.get('loadavg_start')} -> {m.get('loadavg_end')}; vLLM {v.get('vllm')}, "
        f"torch {v.get('torch')}; commit {m.get('git_commit')}"
    )


def gateway_md(d: dict[str, Any]) -> str:
    c = d["config"]
    dtype = c["engine_flags"][c["engine_flags"].index("--dtype") + 1]
    lines = [
        (
            f"Model `{c['model']}`, dtype {dtype}, {c['max_tokens']} output tokens per stream, fixed by "
            f"`{c['length']}`, {c['repeats']} rounds per level. Machine: {machine_line(d['machine'])}."
        ),
        "",
        (
            "| target | streams | TTFT p50 | TTFT p95 | total tok/s | per-stream tok/s | errors "
            "| tok/s vs raw | TTFT p50 added |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in d["targets"].items():
        for lv, r in t["levels"].items():
            rr = d["ratios_to_raw"].get(name, {}).get(lv, {})
            lines.append(
                f"| {LABELS.get(name, name)} | {lv} | {_f(r['ttft_p50_s'], 1, 1000, ' ms')} "
                f"| {_f(r['ttft_p95_s'], 1, 1000, ' ms')} | {_f(r['total_tok_s'])} | {_f(r['per_stream_tok_s'])} "
                f"| {r['errors']}/{r['requests']} | {_f(rr.get('total_tok_s'), 3)} "
                f"| {_f(rr.get('ttft_p50_added_ms'), 1, 1, ' ms')} |"
            )
    ready = ", ".join(f"{LABELS.get(k, k)} {t['ready_s']} s" for k, t in d["targets"].items())
    lines += [
        "",
        f"Ready after: {ready}. Targets at {d['checks']['level']} streams: "
        + ", ".join(f"{k} {'met' if v else '**not met**'}" for k, v in d["checks"].items() if k != "level")
        + ".",
    ]
    return "\n".join(lines)


def interpreter_md(d: dict[str, Any]) -> str:
    s, w, sc, ok = d["single_worker"], d["worker_start"], d["scaling"], d["checks"]
    cpu_ok = next(v for k, v in ok.items() if k.startswith("cpu_scaling"))
    bare, pre = w["bare"], w["numpy_matplotlib"]
    rows: list[tuple[str, str, str, bool | None]] = [
        ("worker start to ready, bare", f"{bare['ready_s_p50']} s, RSS {bare['rss_mib']} MiB", "", None),
        (
            "worker start to ready, numpy + matplotlib",
            f"{pre['ready_s_p50']} s, RSS {pre['rss_mib']} MiB",
            "≤ 1.5 s",
            ok.get("ready_with_numpy_matplotlib_le_1_5s"),
        ),
        (
            "RSS of a pool worker, warm idle",
            f"{s['rss_mib']['warm_idle']} MiB",
            "≤ 200 MiB",
            ok.get("idle_rss_le_200mib"),
        ),
        (
            "RSS of a pool worker after plots (at once / idle)",
            f"{s['rss_mib']['after_plots']} / {s['rss_mib'].get('after_plots_idle', '-')} MiB",
            "≤ 300 MB",
            ok["rss_le_300mb"],
        ),
        (
            "new container from the warm pool",
            f"p50 {s['new_container_ms']['p50']} ms",
            "≤ 50 ms",
            ok["new_container_le_50ms"],
        ),
        (
            "`print(1)` round trip",
            (f"p50 {s['print_ms']['p50']} ms, p99 {s['print_ms']['p99']} ms (n = {s['print_ms']['n']})"),
            "p50 ≤ 2 ms",
            ok["print_p50_le_2ms"],
        ),
        (
            "numpy cell (500x500 matmul)",
            f"first {s['numpy_cell_ms']['first']} ms, p50 {s['numpy_cell_ms']['p50']} ms",
            "",
            None,
        ),
        (
            "matplotlib cell returning a PNG",
            (f"first {s['matplotlib_png_ms']['first']} ms, p50 {s['matplotlib_png_ms']['p50']} ms"),
            "≤ 300 ms",
            ok["matplotlib_png_le_300ms"],
        ),
        (
            "`while True: pass`, 0.5 s timeout",
            (
                f"returned after {s['timeout_0_5s']['returned_after_ms']} ms "
                f"({s['timeout_0_5s']['error_kind']})"
            ),
            "",
            None,
        ),
    ]
    for kind in ("print", "cpu"):
        vals = ", ".join(f"{k}: {v['calls_s']}/s (x{v['ratio_to_1']})" for k, v in sc[kind].items())
        rows.append(
            (
                f"calls/s by workers, `{kind}` cell",
                vals,
                "near-linear to the core count" if kind == "cpu" else "",
                cpu_ok if kind == "cpu" else None,
            )
        )
    out = [
        f"Machine: {machine_line(d['machine'])}.",
        "",
        "| measure | value | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for name, value, target, met in rows:
        out.append(f"| {name} | {value} | {target} | {'' if met is None else 'yes' if met else '**no**'} |")
    return "\n".join(out)


def agent_md(d: dict[str, Any]) -> str:
    f, w = d["first_turn_new_container"], d["warm_container"]
    out = [
        (
            f"Model `{d['config']['model']}` (forced: {d['config']['forced']}), {d['turns']} turns on a warm "
            f"container after the first; answer exact: {d['answer_exact']}. Machine: {machine_line(d['machine'])}."
        ),
        "",
        "| part | first turn (new container) | warm container p50 | p90 |",
        "| --- | --- | --- | --- |",
    ]
    for k in ("total_ms", "engine_ms", "sandbox_ms", "gateway_ms"):
        out.append(
            f"| {k.removesuffix('_ms')} | {f[k]:.1f} ms | {w[k]['p50']:.1f} ms | {w[k]['p90']:.1f} ms |"
        )
    return "\n".join(out)


def pool_burst_md(d: dict[str, Any]) -> str:
    """One row per burst size and configuration: first-cell p50 / p95 / max of both bursts (seconds)."""
    out = [
        (
            f"A pool of 1 warm worker (preloaded: {', '.join(d['preload']) or 'nothing'}) given N new containers "
            f"at once, twice; {d['cores']} cores. Machine: {machine_line(d['machine'])}."
        ),
        "",
        "| burst | configuration | first burst p50 / p95 / max | second burst p50 / p95 / max | spare target after |",
        "| --- | --- | --- | --- | --- |",
    ]
    for n, configs in d["bursts"].items():
        for name, c in configs.items():
            first, second = (
                " / ".join(_f(c[label][k], 2, unit=" s") for k in ("p50_s", "p95_s", "max_s"))
                for label in ("first", "second")
            )
            out.append(f"| {n} | {name} | {first} | {second} | {c['second']['spare_target_after']} |")
    return "\n".join(out)


def plots(results: dict[str, dict[str, Any]], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, d in results.items():
        if name.startswith("gateway"):
            fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
            for t, data in d["targets"].items():
                xs = [int(k) for k in data["levels"]]
                a1.plot(xs, [v["total_tok_s"] for v in data["levels"].values()], "o-", label=LABELS.get(t, t))
                a2.plot(
                    xs,
                    [(v["ttft_p50_s"] or 0) * 1000 for v in data["levels"].values()],
                    "o-",
                    label=LABELS.get(t, t) + " p50",
                )
            a1.set(xlabel="concurrent streams", ylabel="output tok/s (total)", title="throughput")
            a2.set(xlabel="concurrent streams", ylabel="ms", title="time to first token (p50)", yscale="log")
            a1.legend(fontsize=8)
            a2.legend(fontsize=8)
            fig.suptitle(f"{name}: {d['config']['model']}, {d['config']['max_tokens']} tokens per stream")
        elif name == "interpreter":
            fig, a1 = plt.subplots(figsize=(5, 4))
            for kind, data in d["scaling"].items():
                xs = [int(k) for k in data]
                a1.plot(xs, [v["ratio_to_1"] for v in data.values()], "o-", label=f"{kind} cell")
            xs = [int(k) for k in d["scaling"]["cpu"]]
            a1.plot(xs, xs, ":", color="grey", label="linear")
            a1.set(xlabel="workers", ylabel="calls/s relative to 1 worker", title="interpreter scaling")
            a1.legend(fontsize=8)
        elif name == "agent":
            fig, a1 = plt.subplots(figsize=(5, 4))
            parts = ("engine_ms", "sandbox_ms", "gateway_ms")
            bottom = 0.0
            for p in parts:
                v = d["warm_container"][p]["p50"]
                a1.bar(["agent turn (p50)"], [v], bottom=bottom, label=p.removesuffix("_ms"))
                bottom += v
            a1.set(ylabel="ms", title="one code-interpreter turn")
            a1.legend(fontsize=8)
        else:
            continue
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


def load(results_dir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(results_dir.glob("*.json")):
        if "quick" not in path.stem:
            found[path.stem] = json.loads(path.read_text())
    return found


def render(results: dict[str, dict[str, Any]]) -> str:
    parts = []
    for name, d in results.items():
        if name.startswith("gateway"):
            parts += [
                f"### Gateway: {d['config']['model']} model (`{name}.json`)",
                "",
                gateway_md(d),
                "",
                f"![{name}](bench/{name}.png)",
                "",
            ]
    if "interpreter" in results:
        parts += [
            "### Interpreter (`interpreter.json`)",
            "",
            interpreter_md(results["interpreter"]),
            "",
            "![interpreter](bench/interpreter.png)",
            "",
        ]
    if "pool_burst" in results:
        parts += ["### Pool bursts (`pool_burst.json`)", "", pool_burst_md(results["pool_burst"]), ""]
    if "agent" in results:
        parts += [
            "### Agent turn (`agent.json`)",
            "",
            agent_md(results["agent"]),
            "",
            "![agent](bench/agent.png)",
            "",
        ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="bench-results")
    ap.add_argument("--write-doc", action="store_true", help="write plots and tables into docs/")
    ns = ap.parse_args(argv)
    results = load(Path(ns.results))
    text = render(results)
    if ns.write_doc:
        for p in plots(results, REPO / "docs" / "bench"):
            print(f"wrote {p}")
        doc = REPO / "docs" / "benchmarks.md"
        body = doc.read_text()
        if BEGIN not in body or END not in body:
            raise SystemExit(f"{doc} has no {BEGIN} ... {END} markers")
        head, rest = body.split(BEGIN, 1)
        doc.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])
        print(f"wrote {doc}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

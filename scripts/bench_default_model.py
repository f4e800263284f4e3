"""The first minute: how often the embedded default model's code-interpreter turns work, through our server.

A fixed set of small tasks of the kinds a newcomer tries (arithmetic, powers, string work, list
comprehensions, numpy, a matplotlib plot, "run exactly this code", a follow-up turn that uses a variable from
the turn before), each run `--repeats` times with the openai SDK against `vllm-responses serve` on the
default model (SmolLM2-135M-Instruct), the code interpreter offered and its outputs included. Per turn:
  code_ok     the model called the interpreter and its last call ran without error (no traceback in its
              logs; a call retried after a syntax error counts by its retry);
  first_ok    the same for its first call;
  logs_right  the expected value is in the logs (for a plot: an image came back);
  answer_right the final answer states the expected value (plots: not scored);
  completed   the response ended `completed` (not cut off by the output cap, not failed).
Per task, per kind and overall: the share of turns with each. Sampling is the server's default (the model's
generation config, as a user gets it) unless `--temperature` is given; every response gets
`max_output_tokens` `--max-output-tokens` (400) so that a rambling model cannot run for minutes.
Run: `python scripts/bench_default_model.py [--repeats 3] [--concurrency 4] [--quick] [--tasks ID,...]
[--out bench-results]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    ServerProcess,
    engine_flags,
    free_port,
    machine_info,
    model_path,
    our_server_argv,
    write_json,
)

__all__ = ["TASKS", "Task", "main", "score_turn", "summarize"]

TWO_100 = str(2**100)


@dataclass(frozen=True)
class Task:
    """One task: its kind, the user's prompt(s) (a follow-up is a second turn continuing the first) and what
    each turn should produce (a number, a text, or "image" for a plot)."""

    id: str
    kind: str
    prompts: tuple[str, ...]
    expects: tuple[str, ...]


def _t(id_: str, kind: str, *turns: tuple[str, str]) -> Task:
    return Task(id_, kind, tuple(p for p, _ in turns), tuple(e for _, e in turns))


TASKS: tuple[Task, ...] = (
    _t("mul", "arithmetic", ("What is 17 * 23? Use Python.", "391")),
    _t("add3", "arithmetic", ("Compute 123 + 456 + 789 with Python.", "1368")),
    _t("sub", "arithmetic", ("Use Python to calculate 1000 - 1 - 2 - 3.", "994")),
    _t("div", "arithmetic", ("What is 144 divided by 12? Use Python.", "12")),
    _t("fact", "arithmetic", ("Use Python to compute 7 factorial.", "5040")),
    _t("sqrt", "arithmetic", ("What is the square root of 144? Use Python.", "12")),
    _t("sum100", "arithmetic", ("Use Python to compute the sum of the numbers from 1 to 100.", "5050")),
    _t("percent", "arithmetic", ("What is 15% of 200? Use Python.", "30")),
    _t("mod", "arithmetic", ("Use Python to compute 12345 modulo 97.", "26")),
    _t("pow2_10", "powers", ("What is 2 to the power of 10? Use Python.", "1024")),
    _t("pow2_100", "powers", ("What is 2**100? Use Python.", TWO_100)),  # the README's example
    _t("pow3_5", "powers", ("Use Python to compute 3 ** 5.", "243")),
    _t("reverse", "strings", ("Use Python to reverse the string 'hello world'.", "dlrow olleh")),
    _t("upper", "strings", ("Use Python to convert 'python' to upper case.", "PYTHON")),
    _t("len", "strings", ("How many characters are in the word 'extraordinary'? Use Python.", "13")),
    _t("count", "strings", ("Use Python to count how many times 'a' appears in 'banana'.", "3")),
    _t("join", "strings", ("Use Python to join the words ['a', 'b', 'c'] with dashes.", "a-b-c")),
    _t("replace", "strings", ("Use Python to replace 'cat' with 'dog' in 'the cat sat'.", "the dog sat")),
    _t(
        "squares",
        "lists",
        ("Use a Python list comprehension to get the squares of 1 to 5.", "[1, 4, 9, 16, 25]"),
    ),
    _t("sort", "lists", ("Use Python to sort the list [5, 3, 8, 1].", "[1, 3, 5, 8]")),
    _t("max", "lists", ("Use Python to find the maximum of [4, 19, 7, 11].", "19")),
    _t("sumlist", "lists", ("Use Python to sum the list [2, 4, 6, 8].", "20")),
    _t("evens", "lists", ("Use Python to list the even numbers from 1 to 10.", "[2, 4, 6, 8, 10]")),
    _t("np_mean", "numpy", ("Use numpy to compute the mean of [1, 2, 3, 4, 5].", "3")),
    _t("np_std", "numpy", ("Use numpy to compute the standard deviation of [2, 4, 4, 4, 5, 5, 7, 9].", "2")),
    _t("np_dot", "numpy", ("Use numpy to compute the dot product of [1, 2, 3] and [4, 5, 6].", "32")),
    _t("plot_sq", "plot", ("Use matplotlib to plot y = x squared for x from 0 to 10.", "image")),
    _t("plot_bar", "plot", ("Draw a bar chart of the values [3, 1, 2] with matplotlib.", "image")),
    _t("exact_sum", "run_exactly", ("Run exactly this code:\n```python\nprint(sum(range(10)))\n```", "45")),
    _t(
        "exact_list",
        "run_exactly",
        ("Run exactly this code:\n```python\nx = [i * 3 for i in range(4)]\nprint(x)\n```", "[0, 3, 6, 9]"),
    ),
    _t(
        "exact_str",
        "run_exactly",
        ("Run this Python code and tell me the output:\n```python\nprint('abc' * 2)\n```", "abcabc"),
    ),
    _t(
        "follow_x",
        "follow_up",
        ("Use Python to set x = 12 and print it.", "12"),
        ("Now use Python to print x times 3.", "36"),
    ),
    _t(
        "follow_nums",
        "follow_up",
        ("Use Python to store the list [1, 2, 3] in a variable named nums and print it.", "[1, 2, 3]"),
        ("Use Python to print the sum of nums.", "6"),
    ),
)
QUICK = ("mul", "reverse", "exact_sum", "follow_x")
_ERROR = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b", re.M)


def _finds(expect: str, text: str) -> bool:
    """Whether `text` states `expect`: a number as a whole number (thousands separators and a trailing `.0`
    allowed), anything else as a substring."""
    if re.fullmatch(r"\d+", expect):
        plain = re.sub(r"(?<=\d)[,_](?=\d{3})", "", text)
        return re.search(rf"(?<![\d.]){expect}(?:\.0+)?(?!\.?\d)", plain) is not None
    return expect in text


@dataclass
class TurnScore:
    task: str
    kind: str
    turn: int
    code_ok: bool = False
    first_ok: bool = False
    logs_right: bool = False
    answer_right: bool | None = None  # None: not scored (plots)
    completed: bool = False
    status: str | None = None
    calls: int = 0
    seconds: float = 0.0
    error: str | None = None
    answer: str = ""
    logs: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)


def score_turn(task: Task, turn: int, response: dict[str, Any]) -> TurnScore:
    """Score one response (as `model_dump()`d by the SDK) against the task's expectation for `turn`."""
    expect = task.expects[turn]
    calls = [it for it in response.get("output") or [] if it.get("type") == "code_interpreter_call"]
    logs = [str(o.get("logs", "")) for c in calls for o in c.get("outputs") or [] if o.get("type") == "logs"]
    images = [o for c in calls for o in c.get("outputs") or [] if o.get("type") == "image"]
    answer = "".join(
        part.get("text", "")
        for it in response.get("output") or []
        if it.get("type") == "message"
        for part in it.get("content") or []
        if part.get("type") == "output_text"
    )
    score = TurnScore(task.id, task.kind, turn, status=response.get("status"), calls=len(calls))
    failed = [
        any(_ERROR.search(str(o.get("logs", ""))) for o in c.get("outputs") or [] if o.get("type") == "logs")
        for c in calls
    ]
    score.code_ok = bool(calls) and not failed[-1]
    score.first_ok = bool(calls) and not failed[0]
    score.code = [str(c.get("code") or "")[:400] for c in calls]
    if expect == "image":
        score.logs_right = bool(images)
    else:
        score.logs_right = any(_finds(expect, text) for text in logs)
        score.answer_right = _finds(expect, answer)
    score.completed = response.get("status") == "completed"
    score.answer, score.logs = answer[:400], [text[:400] for text in logs]
    return score


def _share(scores: list[TurnScore], key: str) -> float | None:
    values = [getattr(s, key) for s in scores if getattr(s, key) is not None]
    return round(sum(bool(v) for v in values) / len(values), 3) if values else None


KEYS = ("code_ok", "first_ok", "logs_right", "answer_right", "completed")


def summarize(scores: list[TurnScore]) -> dict[str, Any]:
    """Shares overall, per kind and per task (each over the turns it has)."""

    def shares(group: list[TurnScore]) -> dict[str, Any]:
        return {"turns": len(group), **{k: _share(group, k) for k in KEYS}}

    kinds = sorted({s.kind for s in scores})
    tasks = list(dict.fromkeys(s.task for s in scores))
    return {
        "overall": shares(scores),
        "by_kind": {k: shares([s for s in scores if s.kind == k]) for k in kinds},
        "by_task": {t: shares([s for s in scores if s.task == t]) for t in tasks},
    }


async def run_task(client: Any, model: str, task: Task, body: dict[str, Any]) -> list[TurnScore]:
    """Every turn of `task` (a follow-up continues from the previous response); a failed call is scored as
    nothing done, with its error kept."""
    scores: list[TurnScore] = []
    previous: str | None = None
    for turn, prompt in enumerate(task.prompts):
        t0 = time.perf_counter()
        try:
            response = await client.responses.create(
                model=model,
                input=prompt,
                previous_response_id=previous,
                **body,
            )
            data = response.model_dump()
            score = score_turn(task, turn, data)
            previous = data["id"]
        except Exception as exc:  # noqa: BLE001  # a refused or broken turn is a result, not a crash
            score = TurnScore(task.id, task.kind, turn, error=f"{type(exc).__name__}: {exc}"[:300])
        score.seconds = round(time.perf_counter() - t0, 2)
        scores.append(score)
    return scores


async def measure(
    port: int, tasks: list[Task], repeats: int, concurrency: int, body: dict[str, Any]
) -> list[TurnScore]:
    import openai

    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=600, max_retries=0
    )
    model = (await client.models.list()).data[0].id
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> list[TurnScore]:
        async with gate:
            return await run_task(client, model, task, body)

    runs = await asyncio.gather(*(one(t) for _ in range(repeats) for t in tasks))
    await client.close()
    return [s for run in runs for s in run]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="runs of every task")
    ap.add_argument("--concurrency", type=int, default=4, help="tasks run at once")
    ap.add_argument("--max-output-tokens", type=int, default=400)
    ap.add_argument(
        "--temperature", type=float, default=None, help="default: the server's (generation config)"
    )
    ap.add_argument("--model", default="default", help="default (SmolLM2-135M-Instruct) or a path")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--server-args", default="", help="extra flags of ours (quoted)")
    ap.add_argument("--label", default="", help="a name for this configuration, kept in the JSON")
    ap.add_argument("--quick", action="store_true", help=f"tasks {', '.join(QUICK)}, once each")
    ap.add_argument("--tasks", default="", help="only these task ids (comma-separated), e.g. pow2_100")
    ap.add_argument("--out", default="bench-results")
    ns = ap.parse_args(argv)
    tasks = [t for t in TASKS if t.id in QUICK] if ns.quick else list(TASKS)
    if ns.tasks:
        wanted = set(ns.tasks.split(","))
        if unknown := wanted - {t.id for t in TASKS}:
            ap.error(f"unknown task ids: {sorted(unknown)}")
        tasks = [t for t in tasks if t.id in wanted]
    repeats = 1 if ns.quick else ns.repeats
    body: dict[str, Any] = {
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "include": ["code_interpreter_call.outputs"],
        "max_output_tokens": ns.max_output_tokens,
        "store": True,  # follow-ups continue with previous_response_id
    }
    if ns.temperature is not None:
        body["temperature"] = ns.temperature
    model = model_path(ns.model)
    flags, env = engine_flags(model, max_model_len=ns.max_model_len)
    port = free_port()
    workers = max(2, ns.concurrency)
    argv_ = our_server_argv(flags, port, *shlex.split(ns.server_args), sandbox_workers=workers)
    result: dict[str, Any] = {
        "benchmark": "default_model",
        "machine": machine_info(),
        "config": {
            "model": ns.model,
            "label": ns.label,
            "server_args": ns.server_args,
            "tasks": len(tasks),
            "repeats": repeats,
            "concurrency": ns.concurrency,
            "request": {k: v for k, v in body.items() if k != "tools"},
            "quick": ns.quick,
            "only": ns.tasks,
        },
    }
    out = Path(ns.out)
    t0 = time.perf_counter()
    with ServerProcess("ours", argv_, port, env, out / "logs" / "default-model-ours.log") as server:
        result["server_ready_s"] = round(server.ready_s, 1)
        scores = asyncio.run(measure(port, tasks, repeats, ns.concurrency, body))
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result.update(summarize(scores))
    result["turns"] = [asdict(s) for s in scores]
    name = "default-model-quick" if ns.quick else f"default-model{'-' + ns.label if ns.label else ''}"
    path = write_json(ns.out, name, result)
    print(json.dumps({k: result[k] for k in ("overall", "by_kind")}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`/metrics`: parsed with prometheus_client's own parser after real traffic (fake engine and interpreter),
each counter moving by exactly the traffic sent; the live gauges read from the pool and admission."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai

from tests.api.test_responses import wait_until
from tests.support.fakes import FakeEngine, code_call, function_call, say
from tests.support.metrics_text import Samples, parse, value
from tests.support.serving import LiveServer
from vllm_responses.engine.base import EngineUnavailable
from vllm_responses.observe.metrics import LiveCollector, LiveSources, render

MODEL = "fake-model"
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]
WEATHER = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]


def scrape(server: LiveServer) -> tuple[Samples, dict[str, str]]:
    r = httpx.get(server.base_url + "/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


def _idle(server: LiveServer) -> Callable[[], bool]:
    return lambda: value(scrape(server)[0], "vllm_responses_responses_running") == 0


def _failing(request: Any) -> list[Any]:
    raise EngineUnavailable("the engine fell over", code="engine_dead")


def test_counters_move_by_exactly_the_traffic_sent(
    fake_server: LiveServer, client: openai.OpenAI, engine: FakeEngine
) -> None:
    wait_until(_idle(fake_server))  # nothing of an earlier test still running
    before, types = scrape(fake_server)
    assert types["vllm_responses_responses"] == "counter"
    assert types["vllm_responses_time_to_first_token_seconds"] == "histogram"

    engine.reset(say("Hello there."))
    with client.responses.stream(model=MODEL, input="hi") as stream:
        assert stream.get_final_response().status == "completed"
    engine.reset(code_call("print(6 * 7)"), say("It is 42."))
    assert client.responses.create(model=MODEL, input="6*7?", tools=CI).status == "completed"  # type: ignore[arg-type]
    engine.reset(code_call("1 / 0"), say("It failed."))
    assert client.responses.create(model=MODEL, input="1/0?", tools=CI).status == "completed"  # type: ignore[arg-type]
    engine.reset(function_call("get_weather", {"city": "Paris"}))
    assert client.responses.create(model=MODEL, input="weather?", tools=WEATHER).status == "completed"  # type: ignore[arg-type]
    engine.reset(_failing)
    assert client.responses.create(model=MODEL, input="fail").status == "failed"
    engine.reset(say("x" * 90))  # 30 deltas, cut at 16
    assert client.responses.create(model=MODEL, input="long", max_output_tokens=16).status == "incomplete"
    engine.reset(say("y" * 600), delay=0.02)
    bg = client.responses.create(model=MODEL, input="long", background=True)
    wait_until(lambda: client.responses.retrieve(bg.id).output)  # a delta went out
    assert client.responses.cancel(bg.id).status == "cancelled"

    wait_until(_idle(fake_server))
    after, _ = scrape(fake_server)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    statuses = {
        s: moved("vllm_responses_responses_total", status=s)
        for s in ("completed", "incomplete", "failed", "cancelled")
    }
    assert statuses == {"completed": 4, "incomplete": 1, "failed": 1, "cancelled": 1}
    assert moved("vllm_responses_time_to_first_event_seconds_count") == 7
    assert moved("vllm_responses_time_to_first_token_seconds_count") == 6  # the failed one wrote no delta
    assert moved("vllm_responses_agent_turns_count") == 7
    assert moved("vllm_responses_agent_turns_sum") == 9  # the two code responses made two model calls each
    assert moved("vllm_responses_tool_calls_total", type="code_interpreter", outcome="ok") == 1
    assert moved("vllm_responses_tool_calls_total", type="code_interpreter", outcome="exception") == 1
    assert moved("vllm_responses_tool_calls_total", type="function", outcome="returned") == 1
    assert moved("vllm_responses_sandbox_execution_seconds_count", outcome="ok") == 1
    assert moved("vllm_responses_sandbox_execution_seconds_count", outcome="exception") == 1
    assert value(after, "vllm_responses_engine_alive") == 1 and value(after, "vllm_responses_draining") == 0


def test_time_to_first_event_counts_from_the_request_not_the_first_token(
    fake_server: LiveServer, client: openai.OpenAI, engine: FakeEngine
) -> None:
    wait_until(_idle(fake_server))
    engine.reset(say("slow start"), delay=0.3)  # 0.3 s before the first delta
    before, _ = scrape(fake_server)
    with client.responses.stream(model=MODEL, input="hi") as stream:
        assert stream.get_final_response().status == "completed"
    after, _ = scrape(fake_server)
    first_event = after[("vllm_responses_time_to_first_event_seconds_sum", ())] - before.get(
        ("vllm_responses_time_to_first_event_seconds_sum", ()), 0
    )
    first_token = after[("vllm_responses_time_to_first_token_seconds_sum", ())] - before.get(
        ("vllm_responses_time_to_first_token_seconds_sum", ()), 0
    )
    assert first_token - first_event >= 0.29  # created went out before the 0.3 s wait for the first delta


class _Admission:
    running = 2
    queued = 5

    def rejected_total(self) -> int:
        return 7


def test_live_gauges_read_the_pool_and_admission_by_name() -> None:
    stats = {
        "containers_live": 3,
        "containers_busy": 1,
        "workers_idle": 2,
        "workers_starting": 1,
        "waiters": 4,
        "worker_waiters": 2,
        "workers_started": 9,
        "restarts": {"crashed": 2, "timeout": 1},
        "isolation": "cgroup1",
        "watchdog_kills": 3,
        "spare_target": 5,
        "memory_used_bytes": 3 << 28,
    }
    live = LiveCollector(
        LiveSources(
            running=lambda: 6,
            engine_alive=lambda: True,
            draining=lambda: False,
            pool_stats=lambda: stats,
            admission=_Admission,
        )
    )
    samples, types = parse(render(live).decode())
    assert value(samples, "vllm_responses_responses_running") == 6
    assert value(samples, "vllm_responses_admission_running") == 2
    assert value(samples, "vllm_responses_admission_queued") == 5
    assert value(samples, "vllm_responses_admission_rejected_total") == 7
    assert types["vllm_responses_admission_rejected"] == "counter"
    assert value(samples, "vllm_responses_sandbox_containers") == 3
    assert value(samples, "vllm_responses_sandbox_containers_busy") == 1
    assert value(samples, "vllm_responses_sandbox_workers", state="idle") == 2
    assert value(samples, "vllm_responses_sandbox_workers", state="starting") == 1
    assert value(samples, "vllm_responses_sandbox_waiters") == 4
    assert value(samples, "vllm_responses_sandbox_worker_waiters") == 2
    assert value(samples, "vllm_responses_sandbox_workers_started_total") == 9
    assert types["vllm_responses_sandbox_workers_started"] == "counter"
    assert value(samples, "vllm_responses_sandbox_worker_restarts_total", cause="crashed") == 2
    assert value(samples, "vllm_responses_sandbox_worker_restarts_total", cause="timeout") == 1
    assert value(samples, "vllm_responses_sandbox_isolation", mechanism="cgroup1") == 1
    assert value(samples, "vllm_responses_sandbox_watchdog_kills_total") == 3
    assert value(samples, "vllm_responses_sandbox_spare_target") == 5
    assert value(samples, "vllm_responses_sandbox_memory_used_bytes") == 3 << 28


def test_live_gauges_leave_out_what_the_server_does_not_have() -> None:
    few_stats = {
        "containers_live": 1,
        "workers_idle": 2,
        "workers_starting": 0,
    }  # an interpreter whose stats() has no busy, waiter or restart counts
    live = LiveCollector(
        LiveSources(
            running=lambda: 0,
            engine_alive=lambda: False,
            draining=lambda: True,
            pool_stats=lambda: few_stats,
            admission=lambda: None,
        )
    )
    samples, types = parse(render(live).decode())
    assert value(samples, "vllm_responses_sandbox_containers") == 1
    assert value(samples, "vllm_responses_sandbox_workers", state="idle") == 2
    assert (
        value(samples, "vllm_responses_engine_alive") == 0 and value(samples, "vllm_responses_draining") == 1
    )
    live_admission = ("running", "queued", "rejected")  # (its wait histogram is recorded, process-wide)
    assert not any(
        name.startswith(
            (
                *(f"vllm_responses_admission_{n}" for n in live_admission),
                "vllm_responses_sandbox_waiters",
                "vllm_responses_sandbox_worker_waiters",
                "vllm_responses_sandbox_workers_started",
            )
        )
        for name in types
    )

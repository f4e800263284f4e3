"""Prometheus metrics: ours (`vllm_responses_*`) beside vLLM's engine metrics (`vllm:*`), rendered for /metrics.

Counters and histograms are process-wide (prometheus_client's default registry, where vLLM's
`PrometheusStatLogger` registers its own): the code that sees an event records it. Gauges of live state
(sandbox pool, admission queue, running responses, engine, draining) are read when /metrics is scraped, by
`LiveCollector`, from whatever the server has: parts another module does not provide are left out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vllm_responses.protocol.status import TERMINAL

__all__ = [
    "ADMISSION_WAIT",
    "CONTENT_TYPE",
    "FIRST_EVENT",
    "FIRST_TOKEN",
    "RESPONSES",
    "SANDBOX_SECONDS",
    "TOOL_CALLS",
    "TURNS",
    "LiveCollector",
    "LiveSources",
    "code_run",
    "render",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)

RESPONSES = Counter(
    "vllm_responses_responses", "Responses finished, by final status.", ["status"], registry=REGISTRY
)
for _status in TERMINAL:
    RESPONSES.labels(_status)
FIRST_EVENT = Histogram(
    "vllm_responses_time_to_first_event_seconds",
    "From the request's arrival to the response's first event (response.created).",
    buckets=_LATENCY,
    registry=REGISTRY,
)
FIRST_TOKEN = Histogram(
    "vllm_responses_time_to_first_token_seconds",
    "From the request's arrival to the response's first output delta (text, reasoning or tool-call).",
    buckets=_LATENCY,
    registry=REGISTRY,
)
ADMISSION_WAIT = Histogram(
    "vllm_responses_admission_wait_seconds",
    "From a request's acceptance (its place decided) to its admission (a running slot); 0 when admitted at once.",
    buckets=(0.001, 0.005, *_LATENCY),
    registry=REGISTRY,
)
TURNS = Histogram(
    "vllm_responses_agent_turns",
    "Model calls one finished response made (agent-loop turns).",
    buckets=(1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32),
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "vllm_responses_tool_calls",
    "Tool calls the model made, by type (code_interpreter, function, custom, mcp) and outcome.",
    ["type", "outcome"],
    registry=REGISTRY,
)
SANDBOX_SECONDS = Histogram(
    "vllm_responses_sandbox_execution_seconds",
    "Wall time of one code-interpreter execution, by outcome.",
    ["outcome"],
    buckets=_LATENCY,
    registry=REGISTRY,
)


def code_run(outcome: str, seconds: float) -> None:
    """One code-interpreter call ran (or failed to) in `seconds`: `outcome` is "ok", the result's
    `error_kind` ("exception", "timeout", "memory", "crashed", ...) or "cancelled"."""
    TOOL_CALLS.labels("code_interpreter", outcome).inc()
    SANDBOX_SECONDS.labels(outcome).observe(seconds)


@dataclass
class LiveSources:
    """What `LiveCollector` reads at each scrape (`pool_stats` and `admission` give None where the server has
    no such part).

    - `running`: responses in progress.
    - `engine_alive`: whether the engine is up.
    - `draining`: whether the server is shutting down (refusing new responses).
    - `pool_stats`: the sandbox pool's `stats()` mapping.
    - `admission`: the admission controller (`running`, `queued`, `rejected_total`).
    """

    running: Callable[[], int]
    engine_alive: Callable[[], bool]
    draining: Callable[[], bool]
    pool_stats: Callable[[], dict[str, Any] | None]
    admission: Callable[[], object | None]


def _number(obj: object, name: str) -> float | None:
    """`obj.name` as a number (called first when it is a method), None when absent or not a number."""
    value = getattr(obj, name, None)
    if callable(value):
        value = value()
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _stat(stats: dict[str, Any], key: str) -> float | None:
    """`stats[key]` as a number, None when absent or not a number."""
    value = stats.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class LiveCollector(Collector):
    """The live-state gauges (and the admission controller's rejection counter), read at scrape time."""

    def __init__(self, sources: LiveSources) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        s = self.sources
        yield _gauge("vllm_responses_responses_running", "Responses in progress.", float(s.running()))
        yield _gauge(
            "vllm_responses_engine_alive",
            "1 while the engine is alive, 0 once it died.",
            float(s.engine_alive()),
        )
        yield _gauge(
            "vllm_responses_draining", "1 while shutting down (new responses refused).", float(s.draining())
        )
        yield from self._admission(s.admission())
        stats = s.pool_stats()
        if stats is not None:
            yield from self._pool(stats)

    @staticmethod
    def _admission(admission: object | None) -> Iterator[Metric]:
        if admission is None:
            return
        running = _number(admission, "running")
        if running is not None:
            yield _gauge("vllm_responses_admission_running", "Responses admitted and running.", running)
        queued = _number(admission, "queued")
        if queued is not None:
            yield _gauge("vllm_responses_admission_queued", "Responses waiting for admission.", queued)
        rejected = _number(admission, "rejected_total")
        if rejected is not None:
            yield CounterMetricFamily(
                "vllm_responses_admission_rejected", "Requests refused with 429 (limits full).", rejected
            )

    @staticmethod
    def _pool(stats: dict[str, Any]) -> Iterator[Metric]:
        live = _stat(stats, "containers_live")
        if live is not None:
            yield _gauge("vllm_responses_sandbox_containers", "Sandbox containers that exist.", live)
        busy = _stat(stats, "containers_busy")
        if busy is not None:
            yield _gauge("vllm_responses_sandbox_containers_busy", "Sandbox containers running code.", busy)
        workers = GaugeMetricFamily(
            "vllm_responses_sandbox_workers",
            "Sandbox workers not bound to a container, by state.",
            labels=["state"],
        )
        for state, key in (("idle", "workers_idle"), ("starting", "workers_starting")):
            value = _stat(stats, key)
            if value is not None:
                workers.add_metric([state], value)
        if workers.samples:
            yield workers
        waiters = _stat(stats, "waiters")
        if waiters is not None:
            yield _gauge(
                "vllm_responses_sandbox_waiters", "Code calls waiting for a sandbox container.", waiters
            )
        awaiting = _stat(stats, "worker_waiters")
        if awaiting is not None:
            yield _gauge(
                "vllm_responses_sandbox_worker_waiters",
                "Sandbox containers waiting for a worker to finish starting (none was warm).",
                awaiting,
            )
        started = _stat(stats, "workers_started")
        if started is not None:
            yield CounterMetricFamily(
                "vllm_responses_sandbox_workers_started",
                "Sandbox workers started (warm, spare, on demand).",
                started,
            )
        yield from _isolation(stats)
        used = _stat(stats, "memory_used_bytes")
        if used is not None:
            yield _gauge(
                "vllm_responses_sandbox_memory_used_bytes",
                "Resident memory of the sandbox workers (warm and in containers) as last measured.",
                used,
            )
        restarts = stats.get("restarts")
        if isinstance(restarts, dict):
            family = CounterMetricFamily(
                "vllm_responses_sandbox_worker_restarts",
                "Sandbox workers replaced, by cause.",
                labels=["cause"],
            )
            for cause, count in sorted(restarts.items()):
                family.add_metric([str(cause)], float(count))
            yield family


def _isolation(stats: dict[str, Any]) -> Iterator[Metric]:
    """Which mechanism holds the sandbox workers' limits, and how many workers the watchdog killed."""
    isolation = stats.get("isolation")
    if isinstance(isolation, str):
        info = GaugeMetricFamily(
            "vllm_responses_sandbox_isolation",
            "The kernel's mechanism holding each sandbox worker's limits (1 for the active one).",
            labels=["mechanism"],
        )
        info.add_metric([isolation], 1.0)
        yield info
    kills = _stat(stats, "watchdog_kills")
    if kills is not None:
        yield CounterMetricFamily(
            "vllm_responses_sandbox_watchdog_kills", "Sandbox workers killed past their limits.", kills
        )
    target = _stat(stats, "spare_target")
    if target is not None:
        yield _gauge(
            "vllm_responses_sandbox_spare_target",
            "Warm sandbox workers the pool keeps ready now (its spares, more while demand is high).",
            target,
        )


def _process_registry() -> CollectorRegistry:
    """The registry holding vLLM's metrics and our counters: the default one, or (as vLLM does when
    PROMETHEUS_MULTIPROC_DIR is set) one that reads every process's files."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


def render(live: LiveCollector | None) -> bytes:
    """The /metrics body: the process's metrics (vLLM's and ours), then the live gauges."""
    body = generate_latest(_process_registry())
    if live is not None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(live)
        body += generate_latest(registry)
    return body

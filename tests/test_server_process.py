"""The real command (`python -m vllm_responses serve`, tiny model, JSON logs) as a process: vLLM's metrics on
/metrics; its engine-core process killed (responses fail, exit status 4); SIGTERM drains (exit status 0)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics_text import parse, value
from tests.support.real import TINY, exactly
from tests.support.serving import free_port
from vllm_responses.engine.models import repo_root, tiny_model_path
from vllm_responses.service.lifecycle import ENGINE_DEAD_EXIT

pytestmark = [pytest.mark.engine, pytest.mark.slow]

# ~4x the grace below even on the fastest host seen (CI decoded 1800 tiny-model tokens within an 8 s grace)
LONG = {"input": "go on", "max_output_tokens": 4000, "ignore_eos": True}


class ServerProcess:
    """`vllm-responses serve` in a child process, its stderr (JSON lines) in a file."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        path = tiny_model_path()
        if not (path / "config.json").is_file():
            pytest.fail(f"the tiny model is missing at {path}: run scripts/setup.sh")
        self.port = free_port()
        self.log = tmp / "server.log"
        argv = [sys.executable, "-m", "vllm_responses", "serve", "--model", str(path)]
        argv += ["--served-model-name", TINY, "--max-model-len", "4096", "--no-code-interpreter"]
        argv += ["--db", ":memory:", "--port", str(self.port), "--log-format", "json", *extra]
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=repo_root(), stdout=subprocess.DEVNULL, stderr=err)
        self.base_url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited: {self.log.read_text()[-3000:]}"
            try:
                if httpx.get(self.base_url + "/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError("the server did not become ready")

    def engine_core_pid(self) -> int:
        """The child process running vLLM's engine core (named `VLLM::EngineCore`)."""
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                if Path(f"/proc/{child}/comm").read_text().startswith("VLLM::EngineCor"):
                    return int(child)
        raise AssertionError("no engine-core child process")

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


class Stream(threading.Thread):
    """A streamed response read in a thread: its event types, its last event, when its first delta came."""

    def __init__(self, base_url: str, body: dict[str, Any], request_id: str) -> None:
        super().__init__(daemon=True)
        self.url = base_url + "/v1/responses"
        self.body = {"model": TINY, "stream": True, **body}
        self.request_id = request_id
        self.types: list[str] = []
        self.last: dict[str, Any] = {}
        self.first_delta = threading.Event()
        self.start()

    def run(self) -> None:
        headers = {"x-request-id": self.request_id}
        with httpx.stream("POST", self.url, json=self.body, headers=headers, timeout=300) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    self.last = json.loads(line[6:])
                    self.types.append(self.last["type"])
                    if self.last["type"].endswith(".delta"):
                        self.first_delta.set()


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path, *getattr(request, "param", ()))
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


def test_vllm_metrics_and_ours_then_engine_death_exits_with_its_status(server: ServerProcess) -> None:
    body = {"model": TINY, "input": "hi", "structured_outputs": exactly("Hello there.")}
    before = parse(httpx.get(server.base_url + "/metrics").text)[0]
    done = httpx.post(server.base_url + "/v1/responses", json=body, timeout=120).json()
    assert done["status"] == "completed"

    engine_labels = {"engine": "0", "model_name": TINY}

    def moved(name: str) -> float:
        now = parse(httpx.get(server.base_url + "/metrics").text)[0]
        return value(now, name, **engine_labels) - value(before, name, **engine_labels)

    deadline = time.monotonic() + 30  # vLLM records an iteration's stats right after its outputs
    while (
        moved("vllm:generation_tokens_total") < done["usage"]["output_tokens"] and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert moved("vllm:generation_tokens_total") == done["usage"]["output_tokens"]
    assert moved("vllm:prompt_tokens_total") == done["usage"]["input_tokens"]
    samples, types = parse(httpx.get(server.base_url + "/metrics").text)
    for name, kind in {
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram",
        "vllm:request_time_per_output_token_seconds": "histogram",
        "vllm:e2e_request_latency_seconds": "histogram",
        "vllm_responses_responses": "counter",
        "vllm_responses_time_to_first_token_seconds": "histogram",
    }.items():
        assert types.get(name) == kind, name
    assert value(samples, "vllm_responses_responses_total", status="completed") == 1

    stream = Stream(server.base_url, LONG, "doomed-1")
    assert stream.first_delta.wait(120)
    os.kill(server.engine_core_pid(), signal.SIGKILL)
    seen_503 = False
    while server.proc.poll() is None:  # /ready fails for as long as it still answers
        try:
            seen_503 |= httpx.get(server.base_url + "/ready", timeout=2).status_code == 503
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    stream.join(30)
    assert server.proc.wait(60) == ENGINE_DEAD_EXIT
    assert stream.last["type"] == "response.failed"
    error = stream.last["response"]["error"]
    assert error["code"] == "server_error" and "engine died" in error["message"], error
    lines = server.log_lines()
    assert any(line["level"] == "critical" and "engine died" in line["message"] for line in lines)
    (line,) = [x for x in lines if x.get("response", {}).get("id") == stream.last["response"]["id"]]
    assert line["response"]["status"] == "failed" and line["response"]["request_id"] == "doomed-1"
    print("saw /ready 503 before the exit:", seen_503)


@pytest.mark.parametrize("server", [("--shutdown-grace", "4")], indirect=True)
def test_sigterm_drains_running_responses_then_exits_0(server: ServerProcess) -> None:
    short = Stream(
        server.base_url, {"input": "hi", "structured_outputs": exactly("All done, thanks.")}, "short"
    )
    long = Stream(server.base_url, LONG, "long")
    assert short.first_delta.wait(120) and long.first_delta.wait(120)
    server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5  # the signal is handled on the server's loop, soon but not before we ask
    while (ready := httpx.get(server.base_url + "/ready", timeout=10)).status_code == 200:
        assert time.monotonic() < deadline, "still ready after SIGTERM"
        time.sleep(0.05)
    assert ready.status_code == 503 and ready.json()["checks"]["server"]["detail"] == "shutting down"
    refused = httpx.post(server.base_url + "/v1/responses", json={"model": TINY, "input": "new"}, timeout=10)
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
    short.join(60)
    long.join(60)
    assert short.last["type"] == "response.completed"  # finished within the grace
    assert long.last["type"] == "response.failed"
    assert long.last["response"]["error"] == {
        "code": "server_error",
        "message": "The server shut down before this response finished (shutdown grace 4 s).",
    }
    assert server.proc.wait(60) == 0
    statuses = {
        x["response"]["request_id"]: x["response"]["status"] for x in server.log_lines() if "response" in x
    }
    assert statuses == {"short": "completed", "long": "failed"}

"""Engine death and SIGTERM drain on a live server over the fake engine (the lifecycle's own logic; the real
process, signals and vLLM's engine core are in test_server_process.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.api.test_responses import wait_until
from tests.support.fakes import FakeEngine, FakeInterpreter, say
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.service.lifecycle import ENGINE_DEAD_EXIT, Lifecycle

MODEL = "fake-model"


class Stream:
    """One SSE stream read event by event."""

    def __init__(self, http: httpx.Client, body: dict[str, object]) -> None:
        self._cm = http.stream("POST", "/v1/responses", json={"model": MODEL, "stream": True, **body})
        response = self._cm.__enter__()
        assert response.status_code == 200, response.read()
        self._lines = response.iter_lines()
        self.events: list[dict[str, object]] = []

    def next(self) -> dict[str, object]:
        for line in self._lines:
            if line.startswith("data: "):
                self.events.append(json.loads(line[6:]))
                return self.events[-1]
        raise EOFError("the stream ended")

    def until(self, kind: str) -> dict[str, object]:
        while (event := self.next())["type"] != kind and not str(event["type"]).endswith(kind):
            pass
        return event

    def rest(self) -> list[dict[str, object]]:
        start = len(self.events)
        try:
            while True:
                self.next()
        except EOFError:
            pass
        self._cm.__exit__(None, None, None)
        return self.events[start:]


@pytest.fixture
def served() -> Iterator[tuple[LiveServer, Lifecycle, threading.Event]]:
    server = LiveServer(Config(shutdown_grace=1.5), FakeEngine(), FakeInterpreter()).start()
    lifecycle: Lifecycle = server.app.state.vr.lifecycle
    stopped = threading.Event()
    lifecycle.stop_server = stopped.set  # as server.py's would, minus stopping uvicorn: the test looks on
    yield server, lifecycle, stopped
    server.stop()


def _post(server: LiveServer) -> httpx.Response:
    return httpx.post(server.base_url + "/v1/responses", json={"model": MODEL, "input": "new"})


def test_engine_death_fails_running_responses_refuses_new_ones_and_stops_with_its_status(
    served: tuple[LiveServer, Lifecycle, threading.Event],
) -> None:
    server, lifecycle, stopped = served
    engine: FakeEngine = server.engine
    engine.reset(say("z" * 3000), delay=0.01)  # 1000 deltas: about 10 s
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        stream = Stream(http, {"input": "long"})
        stream.until(".delta")
        engine.dead = "killed by the test"
        wait_until(lambda: httpx.get(server.base_url + "/ready").status_code == 503)
        checks = httpx.get(server.base_url + "/ready").json()["checks"]
        assert checks["engine"] == {"ok": False, "detail": "dead: killed by the test"}
        refused = _post(server)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "engine_dead"
        last = stream.rest()[-1]
    assert last["type"] == "response.failed"
    error = last["response"]["error"]  # type: ignore[index]
    assert error["code"] == "server_error" and "engine died" in error["message"]
    assert "killed by the test" in error["message"]
    assert stopped.wait(10) and lifecycle.exit_code == ENGINE_DEAD_EXIT
    rid = last["response"]["id"]  # type: ignore[index]
    stored = httpx.get(f"{server.base_url}/v1/responses/{rid}").json()  # stored as it ended
    assert stored["status"] == "failed" and stored["error"] == error


def test_drain_lets_short_responses_finish_and_ends_long_ones_after_the_grace(
    served: tuple[LiveServer, Lifecycle, threading.Event],
) -> None:
    server, lifecycle, stopped = served
    engine: FakeEngine = server.engine
    engine.reset(say("a" * 30), say("b" * 3000), delay=0.05)  # 10 deltas (0.5 s), then 1000 (50 s)
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        short = Stream(http, {"input": "short"})
        short.until(".delta")
        long = Stream(http, {"input": "long"})
        long.until(".delta")
        lifecycle.request_shutdown()
        wait_until(lambda: httpx.get(server.base_url + "/ready").status_code == 503)
        assert httpx.get(server.base_url + "/ready").json()["checks"]["server"] == {
            "ok": False,
            "detail": "shutting down",
        }
        refused = _post(server)
        assert refused.status_code == 503
        assert refused.json()["error"] == {
            "message": "The server is shutting down and takes no new responses; retry on another instance.",
            "type": "server_error",
            "param": None,
            "code": "shutting_down",
        }
        assert httpx.get(server.base_url + "/health").status_code == 200  # still alive while draining
        assert short.rest()[-1]["type"] == "response.completed"  # finished within the grace
        assert not stopped.is_set()  # the long one still runs
        last = long.rest()[-1]
    assert last["type"] == "response.failed"
    error = last["response"]["error"]  # type: ignore[index]
    assert error == {
        "code": "server_error",
        "message": "The server shut down before this response finished (shutdown grace 1.5 s).",
    }
    assert stopped.wait(10) and lifecycle.exit_code == 0
    rid = last["response"]["id"]  # type: ignore[index]
    assert httpx.get(f"{server.base_url}/v1/responses/{rid}").json()["status"] == "failed"


def test_drain_with_nothing_running_stops_at_once(
    served: tuple[LiveServer, Lifecycle, threading.Event],
) -> None:
    server, lifecycle, stopped = served
    lifecycle.request_shutdown()
    lifecycle.request_shutdown()  # a second request changes nothing
    assert stopped.wait(1.0), "an idle server should not wait out its grace"
    assert lifecycle.exit_code == 0


def test_drain_refuses_websocket_responses_on_open_and_new_sockets(
    served: tuple[LiveServer, Lifecycle, threading.Event],
) -> None:
    server, lifecycle, stopped = served
    url = server.base_url.replace("http://", "ws://") + "/v1/responses"
    with connect(url, open_timeout=10) as ws:
        lifecycle.request_shutdown()
        assert stopped.wait(5)
        ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": "hi"}))
        event = json.loads(ws.recv(timeout=10))
    assert event["type"] == "error" and event["status"] == 503 and event["error"]["code"] == "shutting_down"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=10)
    assert refused.value.response.status_code == 503
    assert json.loads(refused.value.response.body or b"{}")["error"]["code"] == "shutting_down"


def test_drain_refuses_requests_still_queued_for_admission() -> None:
    """A request waiting for a slot when the drain starts gets the 503 at once (a queued stream: its
    `response.failed`, after its created/queued); the running one goes on."""
    config = Config(shutdown_grace=1.5, max_concurrent_responses=1, max_queued_responses=2)
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    lifecycle: Lifecycle = server.app.state.vr.lifecycle
    stopped = threading.Event()
    lifecycle.stop_server = stopped.set
    engine: FakeEngine = server.engine
    engine.reset(say("b" * 3000), delay=0.05)  # the running one: about 50 s
    answers: list[httpx.Response] = []
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as http:
            running = Stream(http, {"input": "long"})
            running.until(".delta")
            queued = threading.Thread(target=lambda: answers.append(_post(server)))
            queued.start()
            wait_until(lambda: server.app.state.vr.service.admission.queued == 1)
            streamed = Stream(http, {"input": "queued too"})
            assert [streamed.next()["type"], streamed.next()["type"]] == [
                "response.created",
                "response.queued",
            ]
            lifecycle.request_shutdown()
            queued.join(5)  # well before the grace ends
            assert not queued.is_alive() and not stopped.is_set()
            assert answers[0].status_code == 503, answers[0].text
            assert answers[0].json()["error"]["code"] == "shutting_down"
            ended = streamed.rest()
            assert [e["type"] for e in ended] == ["response.failed"]
            failed = cast(dict[str, Any], ended[0]["response"])
            assert failed["error"]["code"] == "server_error" and "shutting down" in failed["error"]["message"]
            assert running.rest()[-1]["type"] == "response.failed"  # ended by the grace, as before
        assert stopped.wait(10)
    finally:
        server.stop()

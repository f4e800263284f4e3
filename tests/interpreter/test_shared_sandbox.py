"""Gateways on one shared sandbox service: a real `python -m interpreter_service serve` subprocess (Deno +
Pyodide) with a token, gateways on the fake engine configured with its URL (`--code-interpreter-url`).

Code calls run in the service, a container is used from two gateways, a wrong token and a service killed
mid-call are tool errors the model sees (the response completes), and a restarted service serves again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseCodeInterpreterToolCall

from interpreter_service.service.client import HTTPInterpreter
from tests.support.fakes import FakeEngine, code_call, say
from tests.support.sandbox_service import SandboxService, gateway
from tests.support.serving import LiveServer
from vllm_responses.config import Config

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
TOKEN = "shared-s3cret"
AUTO = [{"type": "code_interpreter", "container": {"type": "auto"}}]
OUTPUTS = ["code_interpreter_call.outputs"]


def _config(service: SandboxService, token: str | None = TOKEN) -> Config:
    return Config(code_interpreter_timeout=20, code_interpreter_url=service.url, code_interpreter_token=token)


def _sdk(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _call(resp: Response) -> ResponseCodeInterpreterToolCall:
    call = resp.output[0]
    assert isinstance(call, ResponseCodeInterpreterToolCall)  # the SDK's own type
    return call


def _logs(call: ResponseCodeInterpreterToolCall) -> str:
    assert call.outputs is not None
    return "".join(o.logs for o in call.outputs if o.type == "logs")


def _service_containers(service: SandboxService) -> list[str]:
    r = httpx.get(service.url + "/v1/containers", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    r.raise_for_status()
    return [c["id"] for c in r.json()["data"]]


@pytest.fixture(scope="module")
def service() -> Iterator[SandboxService]:
    svc = SandboxService(TOKEN, workers=2).start()
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def two_gateways(service: SandboxService) -> Iterator[tuple[LiveServer, LiveServer]]:
    a = gateway(_config(service), FakeEngine())
    b = gateway(_config(service), FakeEngine())
    yield a, b
    a.stop()
    b.stop()


def test_a_code_call_runs_in_the_service(
    service: SandboxService, two_gateways: tuple[LiveServer, LiveServer]
) -> None:
    a, _ = two_gateways
    assert isinstance(a.interpreter, HTTPInterpreter)  # no local pool: the gateway is the service's client
    a.engine.reset(code_call("import numpy as np\nprint(int(np.arange(5).sum()))"), say("It is 10."))
    resp = _sdk(a).responses.create(model="fake-model", input="Sum.", tools=AUTO, include=OUTPUTS)  # type: ignore[arg-type]
    call = _call(resp)
    assert resp.status == "completed" and call.status == "completed" and _logs(call) == "10\n"
    assert call.container_id in _service_containers(service)  # made by the service, listed there
    ready = httpx.get(a.base_url + "/ready", timeout=30)
    sandbox = ready.json()["checks"]["sandbox"]
    assert ready.status_code == 200 and sandbox["ok"] and "worker(s) alive or starting" in sandbox["detail"]
    metrics = httpx.get(a.base_url + "/metrics", timeout=30).text
    assert "vllm_responses_sandbox_containers " in metrics  # the service's pool, as it answers now


def test_one_container_from_two_gateways(two_gateways: tuple[LiveServer, LiveServer]) -> None:
    a, b = two_gateways
    sdk_a, sdk_b = _sdk(a), _sdk(b)
    made = sdk_a.containers.create(name="shared", expires_after={"anchor": "last_active_at", "minutes": 5})
    try:
        seen = sdk_b.containers.retrieve(made.id)  # its own expiry is the service's record, seen by B too
        assert seen.name == "shared" and seen.expires_after is not None and seen.expires_after.minutes == 5
        assert made.id in [c.id for c in sdk_b.containers.list().data]
        tools = [{"type": "code_interpreter", "container": made.id}]
        a.engine.reset(code_call("x = 41"), say("Set."))
        first = sdk_a.responses.create(model="fake-model", input="Set x.", tools=tools, include=OUTPUTS)  # type: ignore[arg-type]
        assert _call(first).container_id == made.id and _call(first).status == "completed"
        b.engine.reset(code_call("print(x + 1)"), say("42."))
        second = sdk_b.responses.create(model="fake-model", input="Read x.", tools=tools, include=OUTPUTS)  # type: ignore[arg-type]
        assert _call(second).container_id == made.id and _logs(_call(second)) == "42\n"
        # files: uploaded through B, read by code run through A, downloaded through B
        up = sdk_b.containers.files.create(made.id, file=("in.txt", b"from b"))
        copy = "open('/mnt/data/out.txt', 'w').write(open('/mnt/data/in.txt').read().upper())"
        a.engine.reset(code_call(copy), say("Done."))
        sdk_a.responses.create(model="fake-model", input="Copy.", tools=tools)  # type: ignore[arg-type]
        files = {f.path: f for f in sdk_b.containers.files.list(made.id).data}
        assert (
            set(files) == {"/mnt/data/in.txt", "/mnt/data/out.txt"} and files["/mnt/data/in.txt"].id == up.id
        )
        out = files["/mnt/data/out.txt"]
        assert sdk_b.containers.files.content.retrieve(out.id, container_id=made.id).read() == b"FROM B"
    finally:
        sdk_b.containers.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        sdk_a.containers.retrieve(made.id)


def test_a_wrong_token_is_a_tool_error(service: SandboxService) -> None:
    bad = gateway(_config(service, token="not-the-token"), FakeEngine())
    try:
        bad.engine.reset(code_call("print(1)"), say("The sandbox refused."))
        resp = _sdk(bad).responses.create(model="fake-model", input="Run.", tools=AUTO, include=OUTPUTS)  # type: ignore[arg-type]
        call = _call(resp)
        assert resp.status == "completed" and call.status == "failed"
        assert "HTTP 401" in _logs(call) and "credentials" in _logs(call)  # the flag to check: in the log
        told = bad.engine.requests[-1].turns[-1]  # the model saw the error as the call's output
        assert "HTTP 401" in str(told)
        ready = httpx.get(bad.base_url + "/ready", timeout=30)
        assert ready.status_code == 503 and "HTTP 401" in ready.json()["checks"]["sandbox"]["detail"]
        missing = httpx.get(service.url + "/v1/containers", timeout=10)  # and the service: 401, no token
        assert missing.status_code == 401
    finally:
        bad.stop()


def test_a_killed_service_fails_the_call_and_a_restarted_one_serves_again() -> None:
    service = SandboxService(TOKEN, workers=1).start()
    gw = gateway(_config(service), FakeEngine())
    try:
        sdk = _sdk(gw)
        gw.engine.reset(code_call("import time\ntime.sleep(60)"), say("The sandbox went away."))
        with sdk.responses.stream(model="fake-model", input="Sleep.", tools=AUTO, include=OUTPUTS) as stream:  # type: ignore[arg-type]
            for event in stream:
                if event.type == "response.code_interpreter_call.interpreting":
                    _wait_busy(service)
                    service.kill()  # kill -9 mid-call
            first = stream.get_final_response()
        call = _call(first)
        assert first.status == "completed" and call.status == "failed"
        assert "unreachable or restarted" in _logs(call)
        assert first.output_text == "The sandbox went away."
        service.start()  # the same port, a new boot: its containers are gone
        gw.engine.reset(code_call("print('back')"), say("Back."))
        later = sdk.responses.create(
            model="fake-model",
            input="Again.",
            tools=AUTO,
            include=OUTPUTS,
            previous_response_id=first.id,  # type: ignore[arg-type]
        )
        again = _call(later)
        assert later.status == "completed" and again.status == "completed" and _logs(again) == "back\n"
        assert again.container_id != call.container_id  # the old one died with the service: a new one
    finally:
        gw.stop()
        service.stop()


def _wait_busy(service: SandboxService) -> None:
    """Until the service runs a call (its pool reports a busy container)."""
    for _ in range(300):
        r = httpx.get(service.url + "/health", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        if r.json()["containers_busy"] == 1:
            return
        time.sleep(0.1)
    raise AssertionError("the code call never started in the service")


def test_the_services_limits_hold_whatever_the_gateway_asks() -> None:
    """One container at most and a 2 GiB budget in the service: a gateway's code call that finds no room in
    time is a failed call the model reads, its POST /v1/containers a 429, and a 4g memory_limit a 400."""
    extra = ("--max-workers", "1", "--queue-timeout", "2", "--memory-budget", "2g")
    service = SandboxService(TOKEN, workers=1, extra=extra).start()
    gw = gateway(_config(service), FakeEngine())
    try:
        sdk = _sdk(gw)
        held = sdk.containers.create(name="held")
        pinned = httpx.post(  # as a response running on another gateway would: not evicted for others
            f"{service.url}/v1/containers/{held.id}/pin", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert pinned.status_code == 204
        gw.engine.reset(code_call("print(1)"), say("No room."))
        resp = sdk.responses.create(model="fake-model", input="Run.", tools=AUTO, include=OUTPUTS)  # type: ignore[arg-type]
        call = _call(resp)
        assert resp.status == "completed" and call.status == "failed" and call.container_id == ""
        assert "no code-interpreter container became free within 2 s" in _logs(call)
        with pytest.raises(openai.RateLimitError):
            sdk.containers.create(name="second")
        with pytest.raises(openai.BadRequestError, match="memory budget"):
            sdk.containers.create(name="big", memory_limit="4g")
        big = [{"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "4g"}}]
        with pytest.raises(openai.BadRequestError, match="memory budget of 2g") as refused:
            sdk.responses.create(model="fake-model", input="Run.", tools=big)  # type: ignore[arg-type]
        assert refused.value.param == "tools[0].container.memory_limit"  # checked before any work
    finally:
        gw.stop()
        service.stop()

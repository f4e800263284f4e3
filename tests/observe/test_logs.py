"""`x-request-id` (taken or made, echoed on every kind of answer) and the log lines that carry it: the JSON
line per finished response, and the text format's suffix."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from websockets.sync.client import connect

from tests.support.fakes import FakeEngine, code_call, say
from tests.support.serving import LiveServer
from vllm_responses.observe.logs import (
    RESPONSE_LOGGER,
    JSONFormatter,
    RequestIdFilter,
    TextFormatter,
    request_id_from,
)

MODEL = "fake-model"
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]
GENERATED = re.compile(r"req_[0-9a-f]{32}")


def test_the_id_is_echoed_on_json_sse_errors_and_metrics(fake_server: LiveServer, engine: FakeEngine) -> None:
    with httpx.Client(base_url=fake_server.base_url, timeout=30) as http:
        body = {"model": MODEL, "input": "hi"}
        assert (
            http.post("/v1/responses", json=body, headers={"x-request-id": "abc-1"}).headers["x-request-id"]
            == "abc-1"
        )
        with http.stream(
            "POST", "/v1/responses", json={**body, "stream": True}, headers={"x-request-id": "sse.2"}
        ) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.headers["x-request-id"] == "sse.2"
            r.read()
        missing = http.get("/v1/responses/resp_missing", headers={"x-request-id": "e:404"})
        assert missing.status_code == 404 and missing.headers["x-request-id"] == "e:404"
        json_type = {"Content-Type": "application/json"}
        bad = http.post("/v1/responses", content=b"{not json", headers={"x-request-id": "e/400", **json_type})
        assert bad.status_code == 400 and bad.headers["x-request-id"] == "e/400"
        assert http.get("/metrics", headers={"x-request-id": "m@1"}).headers["x-request-id"] == "m@1"


def test_an_unhandled_error_500_carries_the_id_too(
    fake_server: LiveServer, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(request: Any) -> int:
        raise RuntimeError("bug")

    monkeypatch.setattr(engine, "count_tokens", broken)
    r = httpx.post(
        fake_server.base_url + "/v1/responses/input_tokens",
        json={"model": MODEL, "input": "x"},
        headers={"x-request-id": "boom-1"},
    )
    assert r.status_code == 500 and r.headers["x-request-id"] == "boom-1"


@pytest.mark.parametrize("given", [None, "", "x" * 129, "has space", "naïve", "a\tb"])
def test_a_missing_or_malformed_id_is_replaced_by_a_new_one(
    fake_server: LiveServer, given: str | None
) -> None:
    headers = {} if given is None else {"x-request-id": given.encode()}  # bytes: UTF-8 sent as is
    first = httpx.get(fake_server.base_url + "/health", headers=headers).headers["x-request-id"]
    second = httpx.get(fake_server.base_url + "/health", headers=headers).headers["x-request-id"]
    assert GENERATED.fullmatch(first) and GENERATED.fullmatch(second) and first != second


def test_request_id_from_accepts_the_documented_charset() -> None:
    ok = "Aa0._:/+=@-" + "z" * 117  # 128 characters
    assert request_id_from([(b"X-Request-ID", ok.encode())]) == ok


def test_the_websocket_handshake_echoes_the_id(fake_server: LiveServer) -> None:
    url = fake_server.base_url.replace("http://", "ws://") + "/v1/responses"
    with connect(url, additional_headers={"x-request-id": "ws-7"}) as ws:
        assert ws.response is not None and ws.response.headers["x-request-id"] == "ws-7"


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The finished-response lines, formatted as `--log-format json` formats them."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JSONFormatter())
    handler.addFilter(RequestIdFilter())
    log = logging.getLogger(RESPONSE_LOGGER)
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    yield out
    log.removeHandler(handler)
    log.setLevel(level)


def test_one_json_line_per_finished_response(
    json_lines: io.StringIO, client: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(code_call("print(6 * 7)"), say("It is 42."))
    resp = client.responses.create(
        model=MODEL,
        input="6*7?",
        tools=CI,
        extra_headers={"x-request-id": "trace-me-1"},  # type: ignore[arg-type]
    )
    lines = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    (line,) = [x for x in lines if x["response"]["id"] == resp.id]
    assert line["level"] == "info" and line["logger"] == RESPONSE_LOGGER and line["ts"].endswith("Z")
    assert line["request_id"] == "trace-me-1"
    fields = line["response"]
    assert resp.usage is not None
    assert fields["request_id"] == "trace-me-1"
    assert {
        k: fields[k] for k in ("status", "model", "input_tokens", "output_tokens", "tool_calls", "turns")
    } == {
        "status": "completed",
        "model": MODEL,
        "input_tokens": resp.usage.input_tokens,
        "output_tokens": resp.usage.output_tokens,
        "tool_calls": 1,
        "turns": 2,
    }
    assert 0 <= fields["time_to_first_event_s"] <= fields["time_to_first_token_s"] <= fields["duration_s"]
    assert fields["error_code"] is None


def test_the_text_format_appends_the_request_id() -> None:
    record = logging.makeLogRecord({"name": "x", "levelname": "INFO", "msg": "hello", "request_id": "r-1"})
    assert TextFormatter().format(record).endswith("INFO x: hello [request_id=r-1]")
    plain = logging.makeLogRecord({"name": "x", "levelname": "INFO", "msg": "hello"})
    RequestIdFilter().filter(plain)  # outside a request: no id
    assert TextFormatter().format(plain).endswith("INFO x: hello")
    assert "request_id" not in json.loads(JSONFormatter().format(plain))

"""Bad input gets a clear OpenAI-style 4xx naming the `param`, never a 500 or a hung stream."""

from __future__ import annotations

import base64
import io
import typing

import httpx
import openai
import pytest
from openai.types.responses import ResponseIncludable
from PIL import Image as PILImage

from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say, think
from tests.support.sandbox_service import gateway
from tests.support.serving import LiveServer, free_port
from vllm_responses.config import Config

MODEL = "fake-model"

CASES = [
    ({"input": "hi"}, 400, "model"),
    ({"model": MODEL}, 400, "input"),
    ({"model": "gpt-9", "input": "hi"}, 404, "model"),
    ({"model": MODEL, "input": "hi", "temperature": 7}, 400, "temperature"),
    ({"model": MODEL, "input": "hi", "top_p": 0}, 400, "top_p"),
    ({"model": MODEL, "input": "hi", "max_output_tokens": 0}, 400, "max_output_tokens"),
    ({"model": MODEL, "input": "hi", "tools": [{"type": "image_generation"}]}, 400, "tools[0].type"),
    ({"model": MODEL, "input": "hi", "tools": [{"type": "function"}]}, 400, "tools[0].name"),
    (
        {"model": MODEL, "input": "hi", "tools": [{"type": "code_interpreter", "container": "bogus"}]},
        400,
        "tools[0].container",
    ),
    (
        {"model": MODEL, "input": "hi", "tools": [{"type": "code_interpreter", "container": "cntr_nope"}]},
        404,
        "tools[0].container",
    ),
    ({"model": MODEL, "input": "hi", "top_logprobs": 21}, 400, "top_logprobs"),
    ({"model": MODEL, "input": "hi", "top_logprobs": -1}, 400, "top_logprobs"),
    ({"model": MODEL, "input": "hi", "include": ["nonsense"]}, 400, "include[0]"),
    ({"model": MODEL, "input": [{"type": "image_generation_call"}]}, 400, "input[0].type"),
    (
        {"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        400,
        "input[0].content[0]",  # the fake model reads text only
    ),
    ({"model": MODEL, "input": [{"role": "wizard", "content": "hi"}]}, 400, "input[0].role"),
    ({"model": MODEL, "input": "hi", "previous_response_id": "resp_missing"}, 404, "previous_response_id"),
    (
        {"model": MODEL, "input": "hi", "tool_choice": {"type": "function", "name": "nope"}},
        400,
        "tool_choice",
    ),
    ({"model": MODEL, "input": "hi", "tool_choice": "required"}, 400, "tool_choice"),
    ({"model": MODEL, "input": "hi", "background": True, "store": False}, 400, "background"),
    ({"model": MODEL, "input": "hi", "conversation": "conv_1"}, 404, "conversation"),
    ({"model": MODEL, "input": "hi", "conversation": {"name": "x"}}, 400, "conversation"),
    ({"model": MODEL, "input": "hi", "metadata": {str(i): "v" for i in range(17)}}, 400, "metadata"),
    ({"model": MODEL, "input": "hi", "text": {"format": {"type": "json_schema"}}}, 400, "text.format"),
]


@pytest.mark.parametrize("body,status,param", CASES, ids=[c[2] + f"-{i}" for i, c in enumerate(CASES)])
def test_bad_request_names_the_param(fake_server: LiveServer, body: dict, status: int, param: str) -> None:
    for stream in (False, True):
        r = httpx.post(fake_server.base_url + "/v1/responses", json={**body, "stream": stream}, timeout=10)
        assert r.status_code == status, r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["param"] == param, err
        assert err["type"] == "invalid_request_error" and err["message"]


def test_not_json(fake_server: LiveServer) -> None:
    r = httpx.post(
        fake_server.base_url + "/v1/responses",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.post(fake_server.base_url + "/v1/responses", json=[1, 2], timeout=10)
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"


def test_unknown_ids_are_404(fake_server: LiveServer) -> None:
    base = fake_server.base_url + "/v1/responses/resp_nope"
    for method, url in [
        ("GET", base),
        ("DELETE", base),
        ("POST", base + "/cancel"),
        ("GET", base + "/input_items"),
    ]:
        r = httpx.request(method, url, timeout=10)
        assert r.status_code == 404, (method, url, r.text)
        assert r.json()["error"]["param"] == "response_id"
    r = httpx.get(fake_server.base_url + "/v1/nothing-here", timeout=10)
    assert r.status_code == 404 and "error" in r.json()


def test_cancel_of_foreground_response_is_409(client: openai.OpenAI, engine: FakeEngine) -> None:
    r = client.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.ConflictError):
        client.responses.cancel(r.id)


def test_unknown_fields_are_400_naming_them(client: openai.OpenAI, engine: FakeEngine) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", extra_body={"some_future_field": {"x": 1}})
    assert err.value.body["param"] == "some_future_field"  # type: ignore[index]
    assert err.value.body["code"] == "unknown_parameter"  # type: ignore[index]
    assert engine.requests == []


def test_fields_the_sdk_knows_are_accepted_even_where_unused(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    r = client.responses.create(
        model=MODEL,
        input="hi",
        service_tier="flex",
        stream_options={"include_obfuscation": False},
        prompt_cache_retention="24h",
    )
    assert r.status == "completed"


def test_api_key() -> None:
    server = LiveServer(Config(api_key="sekrit"), FakeEngine(), FakeInterpreter()).start()
    try:
        bad = openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as err:
            bad.responses.create(model=MODEL, input="hi")
        assert err.value.body["type"] == "authentication_error"  # type: ignore[index]
        assert httpx.get(server.base_url + "/v1/models").status_code == 401
        assert httpx.get(server.base_url + "/health").status_code == 200
        good = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sekrit", max_retries=0)
        assert good.responses.create(model=MODEL, input="hi").status == "completed"
    finally:
        server.stop()


def test_code_interpreter_disabled_is_400() -> None:
    server = LiveServer(Config(), FakeEngine(), None).start()
    try:
        r = httpx.post(
            server.base_url + "/v1/responses",
            json={"model": MODEL, "input": "hi", "tools": [{"type": "code_interpreter"}]},
            timeout=10,
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
    finally:
        server.stop()


def test_unknown_tool_fields_are_not_echoed(fake_server: LiveServer, engine: FakeEngine) -> None:
    from tests.support.wire import validate_response

    tools = [{"type": "code_interpreter", "container": {"type": "auto"}, "strict": True, "future_field": 1}]
    r = httpx.post(
        fake_server.base_url + "/v1/responses",
        json={"model": MODEL, "input": "hi", "tools": tools},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert r.json()["tools"] == [{"type": "code_interpreter", "container": {"type": "auto"}}]
    validate_response(r.json())


# The include values the server honours, and the field each one shows in a response. Every other value
# the SDK knows is refused.
HONOURED = {"code_interpreter_call.outputs": "outputs", "reasoning.encrypted_content": "encrypted_content"}
# (honoured where a search backend serves web_search: tests/tools/test_web_search.py)
# (file_search_call.results: tests/tools/test_file_search.py)
SEARCH_ONLY = {"web_search_call.action.sources", "web_search_call.results", "file_search_call.results"}
# honoured where the engine gives them (tests/api/test_logprobs.py)
LOGPROBS = {"message.output_text.logprobs"}
CI = [{"type": "code_interpreter", "container": {"type": "auto"}}]


def shown(response: dict) -> set[str]:
    """Which include-controlled fields a response shows: code call outputs, sealed reasoning."""
    fields = set()
    for item in response["output"]:
        if item["type"] == "code_interpreter_call" and item["outputs"] is not None:
            fields.add("outputs")
        if item["type"] == "reasoning" and item.get("encrypted_content"):
            fields.add("encrypted_content")
    return fields


@pytest.mark.parametrize("value", typing.get_args(ResponseIncludable))
def test_every_sdk_include_value_is_honoured_or_refused(
    fake_server: LiveServer, engine: FakeEngine, value: str
) -> None:
    base = fake_server.base_url + "/v1/responses"
    # honoured where a search backend serves web_search (test_web_search.py), a file search ran
    # (test_file_search.py), or where the engine scores tokens
    if value == "message.input_image.image_url":  # honoured always: stored input images keep their data URL
        png = io.BytesIO()
        PILImage.new("RGB", (2, 2)).save(png, "PNG")
        url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
        content = [{"type": "input_text", "text": "hi"}, {"type": "input_image", "image_url": url}]
        engine.images = True
        try:
            r = httpx.post(
                base,
                json={"model": MODEL, "input": [{"role": "user", "content": content}], "include": [value]},
            )
        finally:
            engine.images = False
        assert r.status_code == 200, r.text
        items = httpx.get(f"{base}/{r.json()['id']}/input_items", params={"include[]": value}).json()["data"]
        assert items[0]["content"][1]["image_url"] == url
        return
    if value in SEARCH_ONLY | LOGPROBS:
        r = httpx.post(base, json={"model": MODEL, "input": "hi", "include": [value]}, timeout=10)
        assert r.status_code == 200, r.text
        got = httpx.get(f"{base}/{r.json()['id']}", params={"include[]": value}, timeout=10)
        assert got.status_code == 200, got.text
        return
    if value in HONOURED:
        engine.reset(think("Run it.") + code_call("print(1)"), say("1"))
        r = httpx.post(
            base, json={"model": MODEL, "input": "hi", "tools": CI, "include": [value]}, timeout=10
        )
        assert r.status_code == 200, r.text
        assert [it["type"] for it in r.json()["output"]] == ["reasoning", "code_interpreter_call", "message"]
        assert shown(r.json()) == {HONOURED[value]}
        rid = r.json()["id"]
        got = httpx.get(f"{base}/{rid}", params={"include[]": value}, timeout=10)
        assert got.status_code == 200, got.text
        assert shown(got.json()) == {HONOURED[value]}
        return
    r = httpx.post(
        base,
        json={"model": MODEL, "input": "hi", "include": ["code_interpreter_call.outputs", value]},
        timeout=10,
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "include[1]" and value in err["message"] and err["code"] == "unsupported_value"
    rid = httpx.post(base, json={"model": MODEL, "input": "hi"}, timeout=10).json()["id"]
    got = httpx.get(
        f"{base}/{rid}", params={"include[]": ["code_interpreter_call.outputs", value]}, timeout=10
    )
    assert got.status_code == 400 and got.json()["error"]["param"] == "include[1]"
    assert value in got.json()["error"]["message"]


def test_include_on_retrieve_chooses_the_code_outputs(fake_server: LiveServer, engine: FakeEngine) -> None:
    """Both honoured values at once; on retrieve `include[]` shows or hides the kept code outputs, while
    sealed reasoning is part of the stored item (it was asked for, or not, when the response was made)."""
    base = fake_server.base_url + "/v1/responses"
    engine.reset(think("Run it.") + code_call("print(1)"), say("1"))
    body = {"model": MODEL, "input": "hi", "tools": CI, "include": list(HONOURED)}
    r = httpx.post(base, json=body, timeout=10)
    assert r.status_code == 200, r.text
    assert shown(r.json()) == {"outputs", "encrypted_content"}
    rid = r.json()["id"]
    assert shown(httpx.get(f"{base}/{rid}", timeout=10).json()) == {"outputs", "encrypted_content"}
    hidden = httpx.get(f"{base}/{rid}", params={"include[]": "reasoning.encrypted_content"}, timeout=10)
    assert shown(hidden.json()) == {"encrypted_content"}
    engine.reset(think("Run it.") + code_call("print(1)"), say("1"))
    plain = httpx.post(base, json={**body, "include": []}, timeout=10).json()
    assert shown(plain) == set()
    asked = httpx.get(
        f"{base}/{plain['id']}", params={"include[]": "code_interpreter_call.outputs"}, timeout=10
    )
    assert shown(asked.json()) == {"outputs"}
    assert asked.json()["output"][1]["outputs"] == [{"type": "logs", "logs": "1\n"}]


def test_an_unreachable_sandbox_service_is_a_503_that_names_no_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the shared sandbox service down (`--code-interpreter-url` at a closed port on 127.0.0.1), the
    Containers API answers 503 and a code call fails for the model, and nothing the client sees (the 503
    bodies, the code call's output) names the service's address; the server's log does."""
    port = free_port()  # nothing listens there
    config = Config(code_interpreter_url=f"http://127.0.0.1:{port}/sbx", code_interpreter_token="tok3n")
    with caplog.at_level("WARNING"):
        server = gateway(config, FakeEngine())
        try:
            base = server.base_url + "/v1"
            seen = [
                httpx.post(base + "/containers", json={"name": "c"}, timeout=30),
                httpx.get(base + "/containers", timeout=30),
                httpx.get(base + "/containers/cntr_" + "0" * 24, timeout=30),
            ]
            body = {
                "model": MODEL,
                "input": "hi",
                "tools": [{"type": "code_interpreter", "container": "cntr_" + "0" * 24}],
            }
            seen.append(httpx.post(base + "/responses", json=body, timeout=30))
            for r in seen:
                assert r.status_code == 503, r.text
                error = r.json()["error"]
                assert error["type"] == "server_error" and error["message"]
            server.engine.reset(code_call("print(1)"), say("It failed."))
            auto = {
                "model": MODEL,
                "input": "hi",
                "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
            }
            done = httpx.post(
                base + "/responses", json={**auto, "include": ["code_interpreter_call.outputs"]}, timeout=30
            )
            assert done.status_code == 200 and done.json()["output"][0]["status"] == "failed"
            told = server.engine.requests[1].turns[-1].output
            for text in [*(r.text for r in seen), done.text, told]:
                assert f":{port}" not in text and "127.0.0.1" not in text and "/sbx" not in text, text
                assert "tok3n" not in text and "code-interpreter-token" not in text
        finally:
            server.stop()
    assert any(f"127.0.0.1:{port}" in m for m in caplog.messages)  # the operator's log has the address

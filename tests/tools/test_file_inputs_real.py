"""`input_file` parts on vLLM (the tiny model) through the openai SDK: a PDF in a message and a file in a function
call's output reach the model as their text, token for token what the same text sent as text costs."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.pdfs import make_pdf
from tests.support.real import TINY, exactly, tiny_model_server
from tests.support.serving import LiveServer
from tests.support.wire import validate_response

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PDF = make_pdf(["The launch code is PELICAN-42.", "Page two says the launch is on Tuesday."])
BLOCK = (
    '\n<file name="brief.pdf">\n--- page 1 of 2 ---\nThe launch code is PELICAN-42.\n--- page 2 of 2 ---\n'
    "Page two says the launch is on Tuesday.\n</file>\n"
)
PDF_PART = {
    "type": "input_file",
    "filename": "brief.pdf",
    "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
}
TOOL = {"type": "function", "name": "fetch_brief", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    s = tiny_model_server(workers=0)
    yield s
    s.stop()


@pytest.fixture
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def _count(client: openai.OpenAI, items: list[dict[str, Any]], **kwargs: Any) -> int:
    return client.responses.input_tokens.count(model=TINY, input=items, **kwargs).input_tokens  # type: ignore[arg-type]


def test_a_pdf_in_a_message_reaches_the_model_as_its_text(client: openai.OpenAI) -> None:
    with_file = [{"role": "user", "content": [{"type": "input_text", "text": "Read this:"}, PDF_PART]}]
    as_text = [{"role": "user", "content": "Read this:" + BLOCK}]
    without = [{"role": "user", "content": "Read this:"}]
    counted = _count(client, with_file)
    assert counted == _count(client, as_text)  # the model is given exactly the block
    assert counted > _count(client, without) + 30  # ...which is the PDF's text, not nothing
    resp = client.responses.create(
        model=TINY,
        input=with_file,  # type: ignore[arg-type]
        max_output_tokens=16,
        extra_body={"structured_outputs": exactly("PELICAN-42")},
    )
    validate_response(resp.model_dump(mode="json"))
    assert resp.status == "completed" and resp.output_text == "PELICAN-42"
    assert resp.usage is not None and resp.usage.input_tokens == counted


def test_a_file_in_a_function_call_output_reaches_the_model(client: openai.OpenAI) -> None:
    notes = base64.b64encode(b"# Brief\nThe launch is on Tuesday.\n").decode()
    call = {"type": "function_call", "call_id": "call_1", "name": "fetch_brief", "arguments": "{}"}
    output = [
        {"type": "input_text", "text": "Found it."},
        {"type": "input_file", "filename": "brief.md", "file_data": notes},
    ]
    with_file = [
        {"role": "user", "content": "When is the launch?"},
        call,
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    ]
    block = '\n<file name="brief.md">\n# Brief\nThe launch is on Tuesday.\n\n</file>\n'
    as_text = [
        *with_file[:2],
        {"type": "function_call_output", "call_id": "call_1", "output": "Found it." + block},
    ]
    counted = _count(client, with_file, tools=[TOOL])
    assert counted == _count(client, as_text, tools=[TOOL])
    bare = [*with_file[:2], {"type": "function_call_output", "call_id": "call_1", "output": "Found it."}]
    assert counted > _count(client, bare, tools=[TOOL]) + 10
    resp = client.responses.create(
        model=TINY,
        input=with_file,  # type: ignore[arg-type]
        tools=[TOOL],  # type: ignore[list-item]
        max_output_tokens=16,
        extra_body={"structured_outputs": exactly("On Tuesday.")},
    )
    assert resp.status == "completed" and resp.output_text == "On Tuesday."
    assert resp.usage is not None and resp.usage.input_tokens == counted

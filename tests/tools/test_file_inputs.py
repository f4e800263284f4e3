"""`input_file` parts read as text (tools/file_inputs.py) through a live server and the `openai` SDK: what the
model is given for a file in a message or a tool output, from file_data, a container's file_id or a
file_url; what a stored response, a continuation and a conversation keep; and the 400s, naming the part."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.keys import write_keys_file
from tests.support.pdfs import encrypted_pdf, make_pdf
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.config import Config
from vllm_responses.engine.types import Message, ToolResult

MODEL = "fake-model"
KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"
REPORT = make_pdf(["Quarterly revenue rose 12 percent.", None, "Outlook: steady."])
REPORT_TEXT = (
    '<file name="report.pdf">\n--- page 1 of 3 ---\nQuarterly revenue rose 12 percent.\n--- page 2 of 3 ---\n'
    "(no text on this page: it may be a scanned image, which this server does not read)\n"
    "--- page 3 of 3 ---\nOutlook: steady.\n</file>"
)


def data_url(data: bytes, media_type: str = "application/pdf") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def pdf_part(data: bytes = REPORT, filename: str | None = "report.pdf") -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_file", "file_data": data_url(data)}
    return part | ({"filename": filename} if filename else {})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Two projects (keys A and B), small file limits, and file_url allowed for public addresses only."""
    root = tmp_path_factory.mktemp("files")
    entries = [{"key": KEY_A, "project": "proj_a"}, {"key": KEY_B, "project": "proj_b"}]
    write_keys_file(root / "keys.json", entries)
    config = Config(
        api_keys_file=str(root / "keys.json"),
        input_file_max_bytes=4096,
        input_file_max_pages=2,
        input_file_max_chars=300,
        input_file_allowed_urls=("*",),
    )
    live = LiveServer(config, FakeEngine(), FakeInterpreter(max_containers=50), db=str(root / "r.db"))
    yield live.start()
    live.stop()


def _sdk(server: LiveServer, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


@pytest.fixture
def a(server: LiveServer) -> openai.OpenAI:
    return _sdk(server)


@pytest.fixture
def fake(server: LiveServer) -> FakeEngine:
    engine: FakeEngine = server.engine
    engine.reset()
    return engine


def _user_text(engine: FakeEngine, call: int = 0) -> str:
    turns = [t for t in engine.requests[call].turns if isinstance(t, Message) and t.role == "user"]
    return turns[-1].text


# --- what the model is given ------------------------------------------------------------------------------


def test_a_pdf_in_a_message_reaches_the_model_as_its_text_page_by_page(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    client.responses.create(
        model=MODEL,
        input=[
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "Summarise:"}, pdf_part()],  # type: ignore[list-item]
            }
        ],
    )
    assert _user_text(engine) == "Summarise:\n" + REPORT_TEXT + "\n"


def test_plain_base64_with_a_filename_is_read_by_its_name(client: openai.OpenAI, engine: FakeEngine) -> None:
    csv = base64.b64encode(b"city,temp\nOslo,4\n").decode()
    part = {"type": "input_file", "file_data": csv, "filename": "temps.csv"}
    client.responses.create(model=MODEL, input=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    assert _user_text(engine) == '\n<file name="temps.csv">\ncity,temp\nOslo,4\n\n</file>\n'


def test_a_data_url_without_a_filename_is_named_by_its_type(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    part = {"type": "input_file", "file_data": data_url(b'{"a": 1}', "application/json")}
    client.responses.create(model=MODEL, input=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    assert '<file name="file.json">\n{"a": 1}\n</file>' in _user_text(engine)


@pytest.mark.parametrize("kind", ["function", "custom"])
def test_a_tool_output_may_carry_a_file(client: openai.OpenAI, engine: FakeEngine, kind: str) -> None:
    call = (
        {"type": "function_call", "call_id": "c1", "name": "fetch_report", "arguments": "{}"}
        if kind == "function"
        else {"type": "custom_tool_call", "call_id": "c1", "name": "fetch_report", "input": "q3"}
    )
    output = {
        "type": f"{'function' if kind == 'function' else 'custom_tool'}_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "Here it is."}, pdf_part()],
    }
    tool = (
        {"type": "function", "name": "fetch_report", "parameters": {"type": "object", "properties": {}}}
        if kind == "function"
        else {"type": "custom", "name": "fetch_report"}
    )
    client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": "Get the report."}, call, output],  # type: ignore[list-item]
        tools=[tool],  # type: ignore[list-item]
    )
    (result,) = [t for t in engine.requests[0].turns if isinstance(t, ToolResult)]
    assert result.output == "Here it is.\n" + REPORT_TEXT + "\n"


def test_a_file_in_a_container_of_the_caller_is_read_by_its_file_id(
    a: openai.OpenAI, fake: FakeEngine
) -> None:
    box = a.containers.create(name="docs").id
    uploaded = a.containers.files.create(box, file=("notes.md", b"# Notes\nShip on Friday."))
    part = {"type": "input_file", "file_id": uploaded.id}
    a.responses.create(model=MODEL, input=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    assert _user_text(fake) == '\n<file name="notes.md">\n# Notes\nShip on Friday.\n</file>\n'


def test_another_projects_file_id_is_not_found(server: LiveServer, fake: FakeEngine) -> None:
    a, b = _sdk(server, KEY_A), _sdk(server, KEY_B)
    box = a.containers.create(name="a-only").id
    uploaded = a.containers.files.create(box, file=("secret.txt", b"A's secret"))
    part = {"type": "input_file", "file_id": uploaded.id}
    for file_id in (uploaded.id, "cfile_" + "0" * 24, "../etc/passwd"):
        sent = [{"role": "user", "content": [part | {"file_id": file_id}]}]
        error = sdk_refusal(lambda sent=sent: b.responses.create(model=MODEL, input=sent))  # type: ignore[misc]
        assert error["param"] == "input[0].content[0].file_id"
        assert error["code"] == "not_found" and file_id in error["message"]
    assert fake.requests == []


def test_text_and_pages_past_the_limits_are_cut_and_the_model_told(
    a: openai.OpenAI, fake: FakeEngine
) -> None:
    four = make_pdf(["one", "two", "three", "four"])
    long_text = {"type": "input_file", "file_data": data_url(b"x" * 400, "text/plain"), "filename": "x.txt"}
    a.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": [pdf_part(four, "four.pdf"), long_text]}],  # type: ignore[list-item]
    )
    text = _user_text(fake)
    assert (
        "--- page 2 of 4 ---\ntwo\n[pages 3-4 of 4 not read: past this server's limit of 2 pages per PDF]"
        in text
    )
    assert (
        "x" * 300 + "\n[... the text is cut here: past this server's limit of 300 characters per file]"
        in text
    )
    assert "x" * 301 not in text


# --- stored, continued, in a conversation -------------------------------------------------------------------


def test_a_stored_file_input_keeps_its_text_not_its_bytes_and_a_continuation_sees_it(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    first = client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": [pdf_part()]}],  # type: ignore[list-item]
    )
    (item,) = client.responses.input_items.list(first.id).data
    assert item.type == "message"
    (part,) = item.content
    assert part.type == "input_file" and part.filename == "report.pdf" and part.file_data is None
    kept = part.model_dump()
    assert kept["extracted_text"].startswith("--- page 1 of 3 ---\nQuarterly revenue")
    client.responses.create(model=MODEL, previous_response_id=first.id, input="And the outlook?")
    later = [t.text for t in engine.requests[1].turns if isinstance(t, Message) and t.role == "user"]
    assert later == ["\n" + REPORT_TEXT + "\n", "And the outlook?"]


def test_a_conversation_keeps_a_file_added_to_it(client: openai.OpenAI, engine: FakeEngine) -> None:
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": [pdf_part()]}]  # type: ignore[list-item]
    )
    (item,) = client.conversations.items.list(conversation.id).data
    assert item.type == "message" and item.content[0].model_dump().get("file_data") is None
    client.responses.create(model=MODEL, conversation=conversation.id, input="What rose?")
    assert [t.text for t in engine.requests[0].turns if isinstance(t, Message)] == [
        "\n" + REPORT_TEXT + "\n",
        "What rose?",
    ]


# --- refused, naming the part ---------------------------------------------------------------------------------


def _refused(client: openai.OpenAI, part: dict[str, Any]) -> dict[str, Any]:
    body = sdk_refusal(
        lambda: client.responses.create(
            model=MODEL,
            input=[
                {"role": "user", "content": "Read these."},
                {"role": "user", "content": [{"type": "input_text", "text": "This:"}, part]},  # type: ignore[list-item]
            ],
        )
    )
    return body


@pytest.mark.parametrize(
    ("part", "param", "words"),
    [
        (
            {
                "type": "input_file",
                "file_data": data_url(b"PK\x03\x04", "application/zip"),
                "filename": "a.zip",
            },
            "input[1].content[1]",
            "'a.zip' (application/zip) cannot be read: this server reads PDFs, DOCX and PPTX documents and text",
        ),
        (
            {
                "type": "input_file",
                "file_data": base64.b64encode(b"PK\x03\x04").decode(),
                "filename": "r.docx",
            },
            "input[1].content[1]",
            "'r.docx' is not a readable DOCX (not a zip archive)",
        ),
        (pdf_part(encrypted_pdf(["locked"]), "l.pdf"), "input[1].content[1]", "'l.pdf' is encrypted"),
        (pdf_part(b"%PDF-1.7 broken", "b.pdf"), "input[1].content[1]", "'b.pdf' is not a readable PDF"),
        (
            {"type": "input_file", "file_data": "bm90IGJhc2U2NA"},
            "input[1].content[1].filename",
            "plain base64 needs a filename",
        ),
        (
            {"type": "input_file", "file_data": "data:text/plain;base64,@@@", "filename": "t.txt"},
            "input[1].content[1].file_data",
            "not valid base64",
        ),
        (
            {"type": "input_file", "file_data": "data:text/plain,hello", "filename": "t.txt"},
            "input[1].content[1].file_data",
            "must be a base64 data URL",
        ),
        ({"type": "input_file", "filename": "none.pdf"}, "input[1].content[1]", "exactly one of file_data"),
        (
            {"type": "input_file", "file_id": "cfile_" + "1" * 24, "file_url": "https://example.com/a.pdf"},
            "input[1].content[1]",
            "not file_id and file_url",
        ),
    ],
)
def test_a_file_that_cannot_be_read_is_a_400_naming_its_part(
    client: openai.OpenAI, engine: FakeEngine, part: dict[str, Any], param: str, words: str
) -> None:
    error = _refused(client, part)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert words in error["message"], error
    assert engine.requests == []


def test_a_file_past_the_byte_limit_is_a_400_with_the_limit(a: openai.OpenAI, fake: FakeEngine) -> None:
    error = _refused(a, {"type": "input_file", "file_data": data_url(b"y" * 5000, "text/plain")})
    assert error["param"] == "input[1].content[1]" and "limit of 4096 bytes per file" in error["message"]


def test_a_file_in_a_tool_output_that_cannot_be_read_names_its_output_part(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    bad = {"type": "input_file", "file_data": data_url(b"\x89PNG", "image/png"), "filename": "p.png"}
    body = sdk_refusal(
        lambda: client.responses.create(
            model=MODEL,
            input=[
                {"type": "function_call", "call_id": "c9", "name": "shot", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c9", "output": [bad]},  # type: ignore[list-item]
            ],
            tools=[{"type": "function", "name": "shot", "parameters": {"type": "object", "properties": {}}}],
        )
    )
    assert body["param"] == "input[1].output[0]" and "'p.png' (image/png)" in body["message"]


def test_a_conversation_refuses_an_unreadable_file_naming_its_item(client: openai.OpenAI) -> None:
    bad = {"type": "input_file", "file_data": data_url(b"\x00\x01", "application/octet-stream")}
    body = sdk_refusal(
        lambda: client.conversations.create(
            items=[{"type": "message", "role": "user", "content": [bad]}]  # type: ignore[list-item]
        )
    )
    assert body["param"] == "items[0].content[0]"


# --- file_url ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1 serving a PDF at /report.pdf (anything else: 404)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            if self.path != "/docs/report.pdf":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Content-Length", str(len(REPORT)))
            self.end_headers()
            self.wfile.write(REPORT)

        def log_message(self, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{site.server_address[1]}"
    site.shutdown()
    site.server_close()


def _url_part(url: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_file", "file_url": url}]}]


def test_file_url_is_refused_unless_the_operator_allows_it(client: openai.OpenAI, files_site: str) -> None:
    error = sdk_refusal(
        lambda: client.responses.create(model=MODEL, input=_url_part(files_site + "/docs/report.pdf"))
    )
    assert error["param"] == "input[0].content[0].file_url"
    assert error["code"] == "unsupported_value" and "--input-file-allowed-urls" in error["message"]


def test_file_url_to_a_private_address_is_refused_through_star(a: openai.OpenAI, files_site: str) -> None:
    error = sdk_refusal(
        lambda: a.responses.create(model=MODEL, input=_url_part(files_site + "/docs/report.pdf"))
    )
    assert error["param"] == "input[0].content[0].file_url"
    assert "not allowed" in error["message"]


def test_file_url_is_fetched_where_private_networks_are_allowed(files_site: str, tmp_path: Path) -> None:
    config = Config(input_file_allowed_urls=("*",), input_file_allow_private_networks=True)
    live = LiveServer(config, FakeEngine(), None).start()
    try:
        sdk = _sdk(live)
        sdk.responses.create(model=MODEL, input=_url_part(files_site + "/docs/report.pdf"))
        assert _user_text(live.engine) == "\n" + REPORT_TEXT + "\n"
        missing = sdk_refusal(
            lambda: sdk.responses.create(model=MODEL, input=_url_part(files_site + "/nothing.pdf"))
        )
        assert missing["param"] == "input[0].content[0].file_url"
        assert "answered HTTP 404" in missing["message"]
    finally:
        live.stop()


def test_a_streamed_request_with_an_unreadable_file_is_a_400_before_any_event(client: openai.OpenAI) -> None:
    bad = {"type": "input_file", "file_data": data_url(b"GIF89a", "image/gif")}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model=MODEL,
            input=[{"role": "user", "content": [bad]}],  # type: ignore[list-item]
            stream=True,
        )
    assert caught.value.body["param"] == "input[0].content[0]"  # type: ignore[index]

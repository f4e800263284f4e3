"""PDFs read where they cannot hurt (context/extraction.py, context/pdf_budget.py), through a live server: a PDF
whose pages all name one content stream is refused before it is parsed; one past its CPU or time is a 400;
another project's text file is read while PDFs hold every extraction worker; a client that leaves has its
worker killed."""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.keys import write_keys_file
from tests.support.pdfs import make_pdf, shared_stream_pdf
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.context.extraction import ExtractionPool

KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"
# 100 pages naming one stream of 50,000 text-show operators: 4 KB, about 40 s of a parser's CPU.
HOSTILE = shared_stream_pdf(100, 50_000)
SMALL = make_pdf(["Quarterly revenue rose 12 percent."])
# Room enough for HOSTILE, so that it is read (slowly) and holds its worker.
UNLIMITED = {
    "input_file_max_content_bytes": 1 << 40,
    "input_file_extract_cpu": 600.0,
    "input_file_extract_timeout": 600.0,
}


def _pdf_item(data: bytes, filename: str = "doc.pdf") -> dict[str, Any]:
    url = "data:application/pdf;base64," + base64.b64encode(data).decode()
    part = {"type": "input_file", "file_data": url, "filename": filename}
    return {"type": "message", "role": "user", "content": [part]}


def _serve(tmp_path: Path, **config: Any) -> LiveServer:
    entries = [{"key": KEY_A, "project": "proj_a"}, {"key": KEY_B, "project": "proj_b"}]
    write_keys_file(tmp_path / "keys.json", entries)
    cfg = Config(api_keys_file=str(tmp_path / "keys.json"), max_concurrent_responses=16, **config)
    return LiveServer(cfg, FakeEngine(), FakeInterpreter()).start()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    started: list[LiveServer] = []

    def start(**config: Any) -> LiveServer:
        started.append(_serve(tmp_path, **config))
        return started[-1]

    yield start
    for live in started:
        live.stop()


def _sdk(server: LiveServer, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=60)


def _pool(server: LiveServer) -> ExtractionPool:
    pool: ExtractionPool = server.app.state.vr.service.extraction
    return pool


def _until(condition: Callable[[], bool], what: str, within: float = 120.0) -> None:
    """Wait for `condition` (a generous bound: it fails only when the state never comes)."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _open_create(server: LiveServer, key: str, items: list[dict[str, Any]]) -> socket.socket:
    """A `POST /v1/conversations` sent on a raw socket, its answer not read: the caller holds the connection
    (and may close it, as a client that leaves does)."""
    body = json.dumps({"items": items}).encode()
    head = (
        f"POST /v1/conversations HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(head.encode() + body)
    return sock


def _answered(sock: socket.socket) -> bool:
    """Whether any of the answer has come on `sock` (without waiting)."""
    sock.setblocking(False)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def _bad(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    assert caught.value.status_code == 400, caught.value
    error = caught.value.body
    assert isinstance(error, dict) and error["type"] == "invalid_request_error", error
    return error


def test_a_pdf_whose_pages_share_one_content_stream_is_refused_before_it_is_parsed(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve()
    client = _sdk(server)
    error = _bad(lambda: client.conversations.create(items=[_pdf_item(HOSTILE)]))  # type: ignore[list-item]
    assert error["param"] == "items[0].content[0]"
    assert "--input-file-max-content-bytes" in error["message"]
    error = _bad(lambda: client.responses.create(model="fake-model", input=[_pdf_item(HOSTILE)]))  # type: ignore[list-item]
    assert error["param"] == "input[0].content[0]"
    assert httpx.get(server.base_url + "/health").status_code == 200
    conversation = client.conversations.create(items=[_pdf_item(SMALL)])  # type: ignore[list-item]
    [item] = client.conversations.items.list(conversation.id).data
    assert "Quarterly revenue rose 12 percent." in json.dumps(item.model_dump())


@pytest.mark.parametrize(
    ("limit", "flag"),
    [
        ({"input_file_extract_cpu": 1.0}, "--input-file-extract-cpu"),
        ({"input_file_extract_timeout": 1.0}, "--input-file-extract-timeout"),
    ],
)
def test_a_pdf_past_its_cpu_or_time_is_a_400_and_its_worker_is_replaced(
    serve: Callable[..., LiveServer], limit: dict[str, float], flag: str
) -> None:
    server = serve(**{**UNLIMITED, **limit})
    client = _sdk(server)
    error = _bad(lambda: client.conversations.create(items=[_pdf_item(HOSTILE)]))  # type: ignore[list-item]
    assert error["param"] == "items[0].content[0]" and flag in error["message"]
    pool = _pool(server)
    assert pool.killed_total == 1 and pool.busy == 0
    client.conversations.create(items=[_pdf_item(SMALL)])  # type: ignore[list-item]
    assert pool.started_total == 2


def test_pdfs_holding_every_worker_do_not_delay_another_projects_text_file(
    serve: Callable[..., LiveServer],
) -> None:
    """Project A's six slow PDFs hold both workers and wait for them; project B's text file is read meanwhile:
    B's answer comes while none of A's has."""
    server = serve(input_file_extract_workers=2, **UNLIMITED)
    pool = _pool(server)
    held = [_open_create(server, KEY_A, [_pdf_item(HOSTILE, f"a{i}.pdf")]) for i in range(6)]
    try:
        _until(lambda: pool.busy == 2 and pool.waiting == 4, "A's six PDFs hold both workers")
        text = "data:text/plain;base64," + base64.b64encode(b"hello\n").decode()
        part = {"type": "input_file", "file_data": text, "filename": "b.txt"}
        b = _sdk(server, KEY_B).conversations.create(items=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
        assert not any(_answered(sock) for sock in held), "B's file was read after one of A's PDFs"
        [item] = _sdk(server, KEY_B).conversations.items.list(b.id).data
        assert "hello" in json.dumps(item.model_dump())
    finally:
        for sock in held:
            sock.close()
    _until(lambda: pool.busy == 0 and pool.waiting == 0, "A's PDFs given up once its clients left")
    # Both held workers were killed. A waiting PDF whose client's leaving the server had not seen yet may take
    # a place freed by a kill and be killed in its turn, so there may be more; none ran on: every worker
    # started was killed.
    assert 2 <= pool.killed_total == pool.started_total


def test_a_client_that_leaves_has_its_pdfs_worker_killed(serve: Callable[..., LiveServer]) -> None:
    server = serve(**UNLIMITED)
    pool = _pool(server)
    sock = _open_create(server, KEY_A, [_pdf_item(HOSTILE)])
    _until(lambda: pool.busy == 1 and len(pool.workers()) == 1, "the PDF is being read")
    [worker] = pool.workers()
    sock.close()
    _until(lambda: pool.busy == 0, "the PDF given up")
    assert pool.killed_total == 1
    _until(lambda: not _alive(worker), "the worker process ended")
    _sdk(server).conversations.create(items=[_pdf_item(SMALL)])  # type: ignore[list-item]
    assert pool.started_total == 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

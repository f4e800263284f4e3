"""A request's images and files counted and weighed from its body before anything is fetched, copied out of a
container or stored, through a live server: every route that takes input (`POST /v1/responses`, its
`input_tokens`, WebSocket `response.create`, `POST /v1/conversations` and its items); a download stopped as it
goes past the request's total; a container file named twice read once. The URLs fetched are a local HTTP
server's, which counts what it is asked for."""

from __future__ import annotations

import base64
import http.server
import io
import json
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from PIL import Image as PILImage
from websockets.sync.client import connect

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.config import Config
from vllm_responses.engine.types import Message

MODEL = "fake-model"
BIG = 16 * 1024 * 1024  # the bytes /big.txt would send in all
CHUNK = 64 * 1024


def _png() -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (4, 4), (0, 0, 255)).save(buf, "PNG")
    return buf.getvalue()


class Site:
    """A plain HTTP server on 127.0.0.1: a PNG at /img/<n>.png, a short text at /docs/<n>.txt, 16 MiB of text at
    /big.txt sent in 64 KiB chunks; `hits` lists the paths asked for, `big_done` is set once /big.txt's
    handler has ended (`big_sent`: the bytes it wrote before the client went away, or all of them)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.big_done = threading.Event()
        self.big_sent = 0
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                site.hits.append(self.path)
                if self.path == "/big.txt":
                    self._big()
                    return
                body, media = (
                    (_png(), "image/png")
                    if self.path.startswith("/img/")
                    else (b"some notes\n", "text/plain")
                    if self.path.startswith("/docs/")
                    else (None, "")
                )
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _big(self) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(BIG))
                    self.end_headers()
                    for _ in range(BIG // CHUNK):
                        self.wfile.write(b"x" * CHUNK)
                        self.wfile.flush()
                        site.big_sent += CHUNK
                except OSError:
                    pass  # the client went away
                finally:
                    site.big_done.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    served = Site()
    yield served
    served.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A vision model; image and file URLs allowed anywhere (loopback too); at most 16 images and 4 files per
    request, 1 MiB of files in all (a file alone may be up to 64 MiB)."""
    root = tmp_path_factory.mktemp("precheck")
    config = Config(
        input_image_allowed_urls=("*",),
        input_image_allow_private_networks=True,
        input_file_allowed_urls=("*",),
        input_file_allow_private_networks=True,
        max_input_files=4,
        input_file_max_bytes=64 * 1024 * 1024,
        input_files_max_total_bytes=1024 * 1024,
    )
    engine = FakeEngine()
    engine.images = True
    live = LiveServer(config, engine, FakeInterpreter(max_containers=20), db=str(root / "r.db")).start()
    live.db_path = str(root / "r.db")  # type: ignore[attr-defined]
    yield live
    live.stop()


@pytest.fixture
def fresh(server: LiveServer, site: Site) -> Iterator[FakeEngine]:
    """The engine with no requests yet (a vision model), the site with no hits."""
    engine: FakeEngine = server.engine
    engine.reset()
    site.hits.clear()
    yield engine
    engine.images = True


def _sdk(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _message(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Look."}, *parts]}]


def _conversations(server: LiveServer) -> tuple[int, int]:
    """The conversations and conversation items the server's SQLite store holds."""
    with sqlite3.connect(server.db_path) as db:  # type: ignore[attr-defined]
        return (
            db.execute("SELECT count(*) FROM conversations").fetchone()[0],
            db.execute("SELECT count(*) FROM conversation_items").fetchone()[0],
        )


def _ws_error(server: LiveServer, input_: list[dict[str, Any]]) -> dict[str, Any]:
    """The error event a WebSocket `response.create` with `input_` is answered with."""
    with connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL, "input": input_}))
        event: dict[str, Any] = json.loads(ws.recv(timeout=60))
    assert event["type"] == "error" and event["status"] == 400, event
    return dict(event["error"])


def _each_route(server: LiveServer, parts: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """`parts` sent in one message on every route that takes input: each route's name and the error it gave
    (the conversation whose items are added to is made empty first)."""
    sdk, input_ = _sdk(server), _message(parts)
    yield "responses", sdk_refusal(lambda: sdk.responses.create(model=MODEL, input=input_))  # type: ignore[arg-type]
    yield "input_tokens", sdk_refusal(lambda: sdk.responses.input_tokens.count(model=MODEL, input=input_))  # type: ignore[arg-type]
    yield "websocket", _ws_error(server, input_)
    yield "conversations", sdk_refusal(lambda: sdk.conversations.create(items=input_))  # type: ignore[arg-type]
    conversation = sdk.conversations.create().id
    yield "items", sdk_refusal(lambda: sdk.conversations.items.create(conversation, items=input_))  # type: ignore[arg-type]
    assert sdk.conversations.items.list(conversation).data == []


def test_forty_image_urls_are_refused_on_every_route_with_nothing_fetched_or_stored(
    server: LiveServer, site: Site, fresh: FakeEngine
) -> None:
    images = [{"type": "input_image", "image_url": f"{site.url}/img/{n}.png"} for n in range(40)]
    stored = _conversations(server)
    for route, error in _each_route(server, images):
        param = "items" if route in ("conversations", "items") else "input"
        assert (error["code"], error["param"]) == ("too_many_images", f"{param}[0].content[17]"), route
        assert "at most 16" in error["message"]
        assert site.hits == [], route
    assert fresh.requests == []
    assert _conversations(server)[0] == stored[0] + 1  # only the empty one made to add items to
    assert _conversations(server)[1] == stored[1]


def test_a_text_only_model_refuses_an_image_on_every_route_before_fetching_it(
    server: LiveServer, site: Site, fresh: FakeEngine
) -> None:
    fresh.images = False
    stored = _conversations(server)[1]
    image = {"type": "input_image", "image_url": f"{site.url}/img/0.png"}
    for route, error in _each_route(server, [image]):
        param = "items" if route in ("conversations", "items") else "input"
        assert (error["code"], error["param"]) == ("unsupported_value", f"{param}[0].content[1]"), route
        assert "text only" in error["message"]
    assert site.hits == [] and fresh.requests == []
    assert _conversations(server)[1] == stored


def test_input_files_past_the_count_are_refused_before_any_download(
    server: LiveServer, site: Site, fresh: FakeEngine
) -> None:
    files = [{"type": "input_file", "file_url": f"{site.url}/docs/{n}.txt"} for n in range(5)]
    for route, error in _each_route(server, files):
        param = "items" if route in ("conversations", "items") else "input"
        assert (error["code"], error["param"]) == ("too_many_files", f"{param}[0].content[5]"), route
        assert "at most 4" in error["message"]
    assert site.hits == [] and fresh.requests == []


def test_inline_files_past_the_total_are_refused_before_a_file_url_is_fetched(
    server: LiveServer, site: Site, fresh: FakeEngine
) -> None:
    inline = base64.b64encode(b"y" * 600 * 1024).decode()
    files = [
        {"type": "input_file", "file_url": f"{site.url}/docs/0.txt"},
        {"type": "input_file", "file_data": inline, "filename": "a.txt"},
        {"type": "input_file", "file_data": inline, "filename": "b.txt"},
    ]
    for route, error in _each_route(server, files):
        param = "items" if route in ("conversations", "items") else "input"
        assert (error["code"], error["param"]) == ("file_too_large", f"{param}[0].content[3]"), route
        assert "1048576 bytes in all" in error["message"]
    assert site.hits == [] and fresh.requests == []


def test_a_download_past_the_requests_total_is_stopped_midway(
    server: LiveServer, site: Site, fresh: FakeEngine
) -> None:
    site.big_done.clear()
    site.big_sent = 0
    sdk = _sdk(server)
    part = {"type": "input_file", "file_url": f"{site.url}/big.txt"}
    error = sdk_refusal(lambda: sdk.responses.create(model=MODEL, input=_message([part])))  # type: ignore[arg-type]
    assert (error["code"], error["param"]) == ("file_too_large", "input[0].content[1]")
    assert "1048576 bytes in all" in error["message"]
    assert site.big_done.wait(60)
    assert site.big_sent < BIG  # the server hung up before the rest was sent
    assert site.hits == ["/big.txt"] and fresh.requests == []


def test_a_container_file_named_twice_is_read_once(server: LiveServer, fresh: FakeEngine) -> None:
    sdk = _sdk(server)
    box = sdk.containers.create(name="twice").id
    notes = sdk.containers.files.create(box, file=("notes.md", b"# Notes\nShip on Friday."))
    picture = sdk.containers.files.create(box, file=("blue.png", _png()))
    interpreter: FakeInterpreter = server.interpreter
    reads: list[str] = []
    read_file = interpreter.read_file

    async def counted(container_id: str, path: str) -> bytes:
        reads.append(path)
        return await read_file(container_id, path)

    interpreter.read_file = counted  # type: ignore[method-assign]
    try:
        file, image = (
            {"type": "input_file", "file_id": notes.id},
            {"type": "input_image", "file_id": picture.id},
        )
        sdk.responses.create(model=MODEL, input=_message([file, image, file, image]))  # type: ignore[arg-type]
    finally:
        del interpreter.read_file
    assert sorted(reads) == ["/mnt/data/blue.png", "/mnt/data/notes.md"], reads  # once each
    (turn,) = [t for t in fresh.requests[0].turns if isinstance(t, Message) and t.role == "user"]
    assert turn.text.count("Ship on Friday.") == 2 and len(turn.images) == 2


def _bomb() -> str:
    """A PNG of 8,000 x 8,000 pixels (past --max-image-pixels) in a few KB (a decompression bomb), as a data
    URL."""
    buf = io.BytesIO()
    PILImage.new("1", (8_000, 8_000)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def test_images_added_to_conversations_are_checked_as_a_responses_are(
    server: LiveServer, fresh: FakeEngine
) -> None:
    """A decompression bomb or bytes that are no image, inline, are a 400 naming the part on every route: the
    conversations routes too, with nothing stored (a later response would otherwise decode them)."""
    stored = _conversations(server)
    cases = {
        "image_too_large": {"type": "input_image", "image_url": _bomb()},
        "invalid_image": {"type": "input_image", "image_url": "data:image/png;base64,bm90IGFuIGltYWdl"},
    }
    for code, image in cases.items():
        for route, error in _each_route(server, [image]):
            param = "items" if route in ("conversations", "items") else "input"
            assert (error["code"], error["param"]) == (code, f"{param}[0].content[1].image_url"), route
    assert fresh.requests == []
    assert _conversations(server)[1] == stored[1]  # no item kept (the empty conversations to add to aside)

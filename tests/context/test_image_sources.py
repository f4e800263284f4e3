"""`input_image` parts that name their image elsewhere, through a live server and the `openai` SDK: an http(s)
`image_url` (only where `--input-image-allowed-urls` allows it; private addresses only with
`--input-image-allow-private-networks`) and a `file_id` of a file in one of the caller's containers. Each is
fetched once, checked as a data URL is, shown to the (fake, vision) model and kept as a data URL."""

from __future__ import annotations

import base64
import http.server
import io
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from PIL import Image as PILImage

from tests.support.fakes import FakeEngine, FakeInterpreter
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from tests.support.wire import sdk_refusal
from vllm_responses.config import Config
from vllm_responses.engine.types import Image, Message

MODEL = "fake-model"
KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"


def _png(colour: tuple[int, int, int] = (0, 0, 255)) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (4, 4), colour).save(buf, "PNG")
    return buf.getvalue()


PNG = _png()


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1: a PNG at /img/blue.png, text at /img/not.png, else 404."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = {"/img/blue.png": PNG, "/img/not.png": b"just text"}.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _start(config: Config, tmp: Any) -> LiveServer:
    engine = FakeEngine()
    engine.images = True
    return LiveServer(config, engine, FakeInterpreter(max_containers=20), db=str(tmp / "r.db")).start()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Two projects; image URLs allowed anywhere, loopback included."""
    root = tmp_path_factory.mktemp("images")
    entries = [{"key": KEY_A, "project": "proj_a"}, {"key": KEY_B, "project": "proj_b"}]
    write_keys_file(root / "keys.json", entries)
    config = Config(
        api_keys_file=str(root / "keys.json"),
        input_image_allowed_urls=("*",),
        input_image_allow_private_networks=True,
    )
    live = _start(config, root)
    yield live
    live.stop()


def _sdk(server: LiveServer, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


def _message(part: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "Colour?"}, {"type": "input_image", **part}],
        }
    ]


def test_an_image_url_is_fetched_shown_to_the_model_and_kept_as_a_data_url(
    open_server: LiveServer, site: str
) -> None:
    engine: FakeEngine = open_server.engine
    engine.reset()
    sdk = _sdk(open_server)
    response = sdk.responses.create(model=MODEL, input=_message({"image_url": site + "/img/blue.png"}))  # type: ignore[arg-type]
    assert engine.requests[0].turns[-1] == Message("user", "Colour?", (Image(PNG, "image/png"),))
    kept = sdk.responses.input_items.list(response.id).data[0].content  # type: ignore[union-attr]
    assert kept[1].image_url == "data:image/png;base64," + base64.b64encode(PNG).decode()  # type: ignore[union-attr]


def test_an_image_url_that_fails_or_is_no_image_is_a_400_naming_it(
    open_server: LiveServer, site: str
) -> None:
    engine: FakeEngine = open_server.engine
    engine.reset()
    sdk = _sdk(open_server)
    missing = sdk_refusal(
        lambda: sdk.responses.create(model=MODEL, input=_message({"image_url": site + "/img/x.png"}))
    )  # type: ignore[arg-type]
    assert missing["param"] == "input[0].content[1].image_url" and "HTTP 404" in missing["message"]
    junk = sdk_refusal(
        lambda: sdk.responses.create(model=MODEL, input=_message({"image_url": site + "/img/not.png"}))
    )  # type: ignore[arg-type]
    assert junk["param"] == "input[0].content[1]" and junk["code"] == "invalid_image"
    assert engine.requests == []


def test_a_container_files_image_is_read_by_its_file_id_for_its_project_only(open_server: LiveServer) -> None:
    engine: FakeEngine = open_server.engine
    engine.reset()
    a, b = _sdk(open_server, KEY_A), _sdk(open_server, KEY_B)
    box = a.containers.create(name="pics").id
    red = _png((255, 0, 0))
    uploaded = a.containers.files.create(box, file=("red.png", red))
    a.responses.create(model=MODEL, input=_message({"file_id": uploaded.id}))  # type: ignore[arg-type]
    assert engine.requests[0].turns[-1] == Message("user", "Colour?", (Image(red, "image/png"),))
    error = sdk_refusal(lambda: b.responses.create(model=MODEL, input=_message({"file_id": uploaded.id})))  # type: ignore[arg-type]
    assert error["param"] == "input[0].content[1].file_id" and error["code"] == "not_found"
    assert len(engine.requests) == 1


def test_image_urls_are_refused_unless_allowed_and_private_ones_unless_opened(
    site: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for config, words, code in (
        (Config(), "--input-image-allowed-urls", "unsupported_value"),
        (Config(input_image_allowed_urls=("*",)), "not allowed", "invalid_value"),
    ):
        live = _start(config, tmp_path_factory.mktemp("closed"))
        try:
            sdk = openai.OpenAI(base_url=live.base_url + "/v1", api_key="k", max_retries=0, timeout=30)
            error = sdk_refusal(
                lambda sdk=sdk: sdk.responses.create(
                    model=MODEL, input=_message({"image_url": site + "/img/blue.png"})
                )  # type: ignore[arg-type]
            )
            assert error["param"] == "input[0].content[1].image_url"
            assert words in error["message"] and error["code"] == code, error
            assert live.engine.requests == []
        finally:
            live.stop()

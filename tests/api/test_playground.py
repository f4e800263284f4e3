"""The web playground in headless Chromium: a streamed code call and its plot, multi-turn, errors, API key."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import shutil
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from interpreter_service import ExecutionResult
from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say, think
from tests.support.serving import LiveServer
from vllm_responses.config import Config
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import Message, ToolCall

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS_SCREENSHOT = Path(__file__).parents[2] / "docs" / "playground.png"
PLOT_CODE = (
    "import math\n"
    "import matplotlib.pyplot as plt\n\n"
    "ys = [math.sin(x / 4) for x in range(60)]\n"
    'print(f"{len(ys)} points, max {max(ys):.2f}")\n'
    "plt.plot(ys)\n"
    "plt.show()"
)


def plot_png(width: int = 420, height: int = 180) -> bytes:
    """A small RGB PNG of a sine curve on axes, standing in for a matplotlib figure."""
    px = [[(255, 255, 255)] * width for _ in range(height)]
    for x in range(30, width - 10):
        px[height // 2][x] = px[height - 15][x] = (180, 180, 180)
    for y in range(10, height - 15):
        px[y][30] = (180, 180, 180)
    for x in range(30, width - 10):
        y = int(height // 2 - 0.4 * height * math.sin((x - 30) / 30))
        for dy in (-1, 0, 1):
            px[y + dy][x] = (31, 119, 180)
    raw = b"".join(b"\0" + bytes(c for p in row for c in p) for row in px)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


class PlotInterpreter(FakeInterpreter):
    """The fake interpreter, slower (so "interpreting" shows); skips `plt` lines, and `plt.show()` plots."""

    async def execute(
        self, container_id: str, code: str, *, timeout_s: float | None = None
    ) -> ExecutionResult:
        await asyncio.sleep(0.3)
        plain = "\n".join(line for line in code.splitlines() if "plt" not in line)
        result = await super().execute(container_id, plain, timeout_s=timeout_s)
        images = (plot_png(),) if "plt.show()" in code else result.images
        return dataclasses.replace(result, images=images)


@pytest.fixture(scope="module")
def playground_server() -> Iterator[LiveServer]:
    server = LiveServer(Config(code_interpreter_timeout=5.0), FakeEngine(), PlotInterpreter()).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 960, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def open_page(page: Any, server: LiveServer) -> None:
    page.goto(server.base_url + "/")
    page.wait_for_function("document.querySelector('#model').options.length > 0")


def send(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def wait_idle(page: Any) -> None:
    page.wait_for_function("document.querySelector('#send').textContent === 'Send'")


# Records every intermediate state of the first code block and its badge, from the mutation records.
RECORD = """() => {
  window.codeLengths = []; window.badges = [];
  new MutationObserver((records) => {
    for (const r of records) {
      const code = document.querySelector('.code-call code');
      if (code && code.contains(r.target)) window.codeLengths.push(code.textContent.length);
      for (const n of r.addedNodes) {
        if (r.target.classList && r.target.classList.contains('badge')) window.badges.push(n.textContent);
        const badge = n.querySelector && n.querySelector('.badge');
        if (badge) window.badges.push(badge.textContent);
      }
    }
  }).observe(document.getElementById('log'), {childList: true, subtree: true, characterData: true});
}"""


def test_streamed_code_call_plot_and_second_turn(
    page: Any, playground_server: LiveServer, tmp_path: Path
) -> None:
    engine: FakeEngine = playground_server.engine
    first_answer = "Here is the sine curve: it peaks at 1.00 and repeats every 25 steps."
    second_answer = "Its minimum is -1.00, half a period after the peak."
    engine.reset(
        think("The user wants a plot, so I will compute the points and draw them.") + code_call(PLOT_CODE),
        say(first_answer),
        say(second_answer),
        delay=0.03,
    )
    open_page(page, playground_server)
    assert page.eval_on_selector("#model", "s => s.value") == "fake-model"
    page.evaluate(RECORD)
    with page.expect_request("**/v1/responses") as first_request:
        send(page, "Plot a sine wave")
    body = first_request.value.post_data_json
    assert body["stream"] is True and body["include"] == ["code_interpreter_call.outputs"]
    assert body["tools"] == [{"type": "code_interpreter", "container": {"type": "auto"}}]
    assert "previous_response_id" not in body

    page.wait_for_function(
        "() => { const i = document.querySelector('.code-call img.figure');"
        " return i && i.complete && i.naturalWidth > 0 }"
    )
    assert page.locator(".code-call img.figure").get_attribute("src").startswith("data:image/png;base64,")
    assert page.inner_text(".code-call code") == PLOT_CODE
    assert page.inner_text(".code-call .logs").strip() == "60 points, max 1.00"
    page.wait_for_function(f"document.querySelector('.message')?.textContent === {first_answer!r}")
    assert page.inner_text(".code-call .badge") == "completed"
    wait_idle(page)

    lengths = page.evaluate("window.codeLengths")
    partial = {n for n in lengths if 0 < n < len(PLOT_CODE)}
    assert len(partial) >= 5, lengths  # the code block filled delta by delta
    assert lengths == sorted(lengths) and lengths[-1] == len(PLOT_CODE)
    badges = page.evaluate("window.badges")
    assert [b for b in badges if b in ("in progress", "interpreting", "completed")][:1] == ["in progress"]
    assert badges.index("in progress") < badges.index("interpreting") < badges.index("completed"), badges
    assert page.locator(".reasoning").get_attribute("open") is None  # collapsed
    assert "The user wants a plot" in page.text_content(".reasoning-text")
    first_id = page.inner_text(".turn .meta").split(" · ")[0]
    assert first_id.startswith("resp_")
    assert "tokens" in page.inner_text("#status")

    with page.expect_request("**/v1/responses") as second_request:
        send(page, "And the minimum?")
    assert second_request.value.post_data_json["previous_response_id"] == first_id
    page.wait_for_function(f"document.querySelectorAll('.message')[1]?.textContent === {second_answer!r}")
    wait_idle(page)
    turns = engine.requests[2].turns
    assert Message("user", "Plot a sine wave") in turns and any(isinstance(t, ToolCall) for t in turns)
    assert turns[-1] == Message("user", "And the minimum?")

    # The whole conversation in the viewport, so the sticky header and footer sit where they belong.
    page.set_viewport_size({"width": 960, "height": page.evaluate("document.documentElement.scrollHeight")})
    page.screenshot(path=str(tmp_path / "playground.png"))
    if os.environ.get("UPDATE_PLAYGROUND_SCREENSHOT"):
        page.screenshot(path=str(DOCS_SCREENSHOT))

    page.click("#new")
    assert page.locator(".turn").count() == 0
    engine.reset(say("Fresh start."))
    with page.expect_request("**/v1/responses") as third_request:
        send(page, "Hello again")
    assert "previous_response_id" not in third_request.value.post_data_json
    page.wait_for_selector("text=Fresh start.")


def test_response_failed_is_shown(page: Any, playground_server: LiveServer) -> None:
    def boom(request: object) -> list:
        raise EngineError("the engine fell over")

    playground_server.engine.reset(boom)
    open_page(page, playground_server)
    send(page, "hi")
    page.wait_for_selector(".error")
    assert page.inner_text(".error") == "Response failed: the engine fell over"
    wait_idle(page)


def test_failed_code_call_badge_and_logs(page: Any, playground_server: LiveServer) -> None:
    playground_server.engine.reset(code_call("while True: pass  # fake-timeout"), say("The code timed out."))
    open_page(page, playground_server)
    send(page, "loop forever")
    page.wait_for_selector("text=The code timed out.")
    assert page.inner_text(".code-call .badge") == "failed"
    red = page.eval_on_selector(".code-call .badge", "b => getComputedStyle(b).backgroundColor")
    assert red == "rgb(207, 34, 46)"
    assert "timed out" in page.inner_text(".code-call .logs")
    wait_idle(page)


def test_stream_ending_without_terminal_event_is_shown(page: Any, playground_server: LiveServer) -> None:
    frames = [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_cut", "status": "in_progress"},
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {"type": "message", "id": "msg_1", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "sequence_number": 2,
            "output_index": 0,
            "delta": "Half an ans",
        },
    ]
    sse = "".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n" for f in frames)
    open_page(page, playground_server)
    page.route("**/v1/responses", lambda r: r.fulfill(status=200, content_type="text/event-stream", body=sse))
    send(page, "hi")
    page.wait_for_selector(".error")
    assert "connection closed before the response finished" in page.inner_text(".error")
    assert page.inner_text(".message") == "Half an ans"
    wait_idle(page)


def test_stop_aborts_the_response(page: Any, playground_server: LiveServer) -> None:
    engine: FakeEngine = playground_server.engine
    engine.reset(say("word " * 200), delay=0.05)
    open_page(page, playground_server)
    send(page, "talk")
    page.wait_for_selector(".message")
    page.click("#send")  # now labelled Stop
    page.wait_for_selector("text=Stopped.")
    wait_idle(page)
    deadline = time.monotonic() + 10
    while not engine.aborted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.aborted == [engine.requests[0].request_id]  # the server cancelled the engine request


def test_api_key(page: Any) -> None:
    server = LiveServer(Config(api_key="sekrit"), FakeEngine(), FakeInterpreter()).start()
    try:
        assert httpx.get(server.base_url + "/").status_code == 200  # the page itself is public
        page.goto(server.base_url + "/")
        page.wait_for_selector("#status.error")
        assert "HTTP 401" in page.inner_text("#status")
        page.fill("#key", "wrong")
        page.press("#key", "Tab")
        send(page, "hi")
        # the turn's error, not the status line's (the models list, re-read with the new key, fails too)
        page.wait_for_selector(".assistant .error")
        assert page.inner_text(".assistant .error").startswith("HTTP 401: Incorrect or missing API key")

        page.fill("#key", "sekrit")
        page.press("#key", "Tab")
        page.wait_for_function("document.querySelector('#model').value === 'fake-model'")
        with page.expect_request("**/v1/responses") as request:
            send(page, "hi")
        assert request.value.headers["authorization"] == "Bearer sekrit"
        page.wait_for_selector("text=Hello from the fake engine.")
        page.reload()
        assert page.input_value("#key") == "sekrit"  # kept in localStorage
    finally:
        server.stop()

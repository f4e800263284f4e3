"""The playground over the real parts (tiny model on vLLM CPU, Deno + Pyodide workers) in headless Chromium.

The page's "Extra request fields" box carries the `structured_outputs` that make the random-weight model
write plotting code; everything after that is real: the streamed deltas, the sandbox run, the PNG.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_playground import CHROMIUM, CHROMIUM_ARGS, RECORD, open_page, send, wait_idle
from tests.support.real import exactly, hermes_call, tiny_model_server
from tests.support.serving import LiveServer

pytestmark = [
    pytest.mark.engine,
    pytest.mark.sandbox,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
]

CODE = (
    "import matplotlib.pyplot as plt\n"
    "xs = list(range(10))\n"
    "plt.plot(xs, [x * x for x in xs])\n"
    "print('plotted', len(xs), 'points')"
)


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    s = tiny_model_server(workers=1)
    yield s
    s.stop()


def test_real_plot_streams_runs_and_renders(server: LiveServer, tmp_path: Any) -> None:
    from playwright.sync_api import sync_playwright

    extra = {
        "temperature": 0,
        "structured_outputs": [exactly(hermes_call(CODE)), exactly("Here is the plot of squares.")],
    }
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 960, "height": 900})
        page.set_default_timeout(120_000)
        open_page(page, server)
        page.evaluate(RECORD)
        page.click("details.extra summary")
        page.fill("#extra", json.dumps(extra))
        send(page, "Plot the squares of 0..9.")
        wait_idle(page)
        lengths = page.evaluate("window.codeLengths")
        assert page.inner_text(".code-call code") == CODE
        assert len(set(lengths)) >= 3 and lengths == sorted(lengths), lengths  # it filled in as deltas came
        assert page.inner_text(".code-call .badge") == "completed"
        assert "plotted 10 points" in page.inner_text(".code-call")
        page.wait_for_function(
            "(() => { const i = document.querySelector('.code-call img');"
            " return i && i.complete && i.naturalWidth > 100; })()"
        )
        assert page.get_attribute(".code-call img", "src").startswith("data:image/png;base64,")
        assert "Here is the plot of squares." in page.inner_text("#log")
        page.screenshot(path=str(tmp_path / "playground-real.png"), full_page=True)
        browser.close()

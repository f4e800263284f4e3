"""A fake of SearXNG's JSON search API on 127.0.0.1, for the tests of the served `web_search` tool (the `searx`
fixture of tests/conftest.py starts one per test module)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.serving import free_port

__all__ = ["HUGE", "RESULTS", "FakeSearx"]

RESULTS = [
    {
        "url": "https://docs.python.org/3/whatsnew/3.13.html",
        "title": "What's New In Python 3.13",
        "content": "JIT.",
    },
    {"url": "https://peps.python.org/pep-0703/", "title": "PEP 703", "content": "Free threading."},
    {"url": "https://example.com/other", "title": "Other", "content": "x" * 2000},
]
HUGE = 3 * 1024 * 1024


class FakeSearx:
    """SearXNG's `GET /search?q=...&format=json` on 127.0.0.1: `queries` records what was asked. A query with
    "boom" answers 500, one with "slow" sleeps 3 s, one with "nothing" finds nothing, one with "huge" answers
    3 MiB of results, one with "drip" sends a byte every 0.1 s for a minute."""

    def __init__(self) -> None:
        self.queries: list[dict[str, list[str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                params = parse_qs(urlparse(self.path).query)
                outer.queries.append(params)
                q = params.get("q", [""])[0]
                if "slow" in q:
                    time.sleep(3)
                if "drip" in q:
                    self._drip()
                    return
                status, body = (
                    (500, {}) if "boom" in q else (200, {"results": [] if "nothing" in q else RESULTS})
                )
                if "huge" in q:
                    body = {"results": [*RESULTS, {"url": "https://x.test/", "content": "x" * HUGE}]}
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the "slow" search's client gave up
                    pass

            def _drip(self) -> None:
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"results": [')
                    for _ in range(600):
                        time.sleep(0.1)
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/search"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

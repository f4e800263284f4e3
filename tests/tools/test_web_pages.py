"""The web search's page actions, `open_page` and `find_in_page`, over the scripted engine against a fake SearXNG
whose results point at fake pages on 127.0.0.1 (`--web-search-page-allow-private-networks`): the page's text
shown, passages found, each a `web_search_call` item and events as the SDK types them; a URL that is not a
result refused, a private address refused without the setting, large, slow, non-text and moved pages failing
as the call's error while the response goes on; the items given back read as they did the first time."""

from __future__ import annotations

import collections
import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import openai
import pytest
from openai.types.responses import ResponseFunctionWebSearch, ResponseOutputMessage
from openai.types.responses.response_function_web_search import ActionFind, ActionOpenPage

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.serving import LiveServer, free_port, proxy_trap
from tests.support.wire import check_stream, parse_sse, validate_as, validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import ToolCall, ToolResult

MODEL = "fake-model"
WEB: list[Any] = [{"type": "web_search"}]
ARTICLE = """<!doctype html><html><head><title>The  Article</title>
<style>body { color: red }</style><script>var secret = "script text";</script></head>
<body><nav><a href="/">Home</a></nav><h1>Free threading</h1>
<p>Python 3.13 can run <b>without</b> the GIL.</p><p>The needle is here.</p>
<ul><li>first point</li><li>second NEEDLE point</li></ul></body></html>"""
LONG = "word " * 2000 + "the lonely zebra at the end."


class FakeWeb:
    """One server on 127.0.0.1: SearXNG's `/search` (a result per word of the query, at `/<word>` on this
    server, titled `Title <word>`) and the pages; `fetched` counts the GETs of each page."""

    def __init__(self) -> None:
        self.fetched: collections.Counter[str] = collections.Counter()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                if url.path == "/search":
                    words = parse_qs(url.query).get("q", [""])[0].split()
                    results = [
                        {"url": f"{outer.base}/{w}", "title": f"Title {w}", "content": f"About {w}."}
                        for w in words
                    ]
                    self._send(200, "application/json", json.dumps({"results": results}).encode())
                    return
                outer.fetched[url.path] += 1
                self._page(url.path)

            def _page(self, path: str) -> None:
                if path == "/article":
                    self._send(200, "text/html; charset=utf-8", ARTICLE.encode())
                elif path == "/plain":
                    self._send(200, "text/plain", b"Just  text.\nSecond line.")
                elif path == "/long":
                    self._send(200, "text/plain", LONG.encode())
                elif path == "/pdf":
                    self._send(200, "application/pdf", b"%PDF-1.4 not read")
                elif path == "/moved":
                    self._redirect("/article")
                elif path == "/away":  # the same server under another name: another site
                    self._redirect(f"http://localhost:{outer.port}/article")
                elif path == "/big":
                    self.send_response(200)
                    self.send_header("content-type", "text/html")
                    self.end_headers()
                    try:
                        for _ in range(48):  # 3 MiB
                            self.wfile.write(b"<p>" + b"x" * 65536 + b"</p>")
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                elif path in ("/gzipped", "/bomb"):  # sent compressed, though `identity` was asked
                    data = ARTICLE.encode() if path == "/gzipped" else b" " * (10 * 1024 * 1024)
                    packed = gzip.compress(data)
                    self.send_response(200)
                    self.send_header("content-type", "text/html")
                    self.send_header("content-encoding", "gzip")
                    self.send_header("content-length", str(len(packed)))
                    self.end_headers()
                    self.wfile.write(packed)
                elif path == "/brotli":
                    self.send_response(200)
                    self.send_header("content-type", "text/html")
                    self.send_header("content-encoding", "br")
                    self.send_header("content-length", "4")
                    self.end_headers()
                    self.wfile.write(b"\x0b\x00\x80\x03")
                elif path == "/slow":
                    time.sleep(3)
                    self._send(200, "text/plain", b"too late")
                else:
                    self._send(404, "text/plain", b"not found")

            def _redirect(self, to: str) -> None:
                self.send_response(302)
                self.send_header("location", to)
                self.send_header("content-length", "0")
                self.end_headers()

            def _send(self, status: int, media: str, data: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", media)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # a client that gave up
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def web() -> Iterator[FakeWeb]:
    fake = FakeWeb()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.fixture(scope="module")
def live(web: FakeWeb) -> Iterator[LiveServer]:
    config = Config(
        web_search_url=f"{web.base}/search",
        web_search_timeout=1.0,
        web_search_page_allow_private_networks=True,
    )
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    yield server
    server.stop()


@pytest.fixture
def engine(live: LiveServer) -> FakeEngine:
    live.engine.reset()
    return live.engine  # type: ignore[no-any-return]


@pytest.fixture
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def read(engine: FakeEngine, call: int = -1) -> str:
    """What the model read last before model call `call`: the output of the turn before it."""
    turn = engine.requests[call].turns[-1]
    assert isinstance(turn, ToolResult)
    return turn.output


def test_open_page_shows_the_pages_text_and_cites_its_title(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb
) -> None:
    url = f"{web.base}/article"
    answer = f"It can run without the GIL ({url})."
    engine.reset(
        function_call("web_search", {"query": "article"}),
        function_call("open_page", {"url": url}),
        say(answer),
    )
    r = client.responses.create(model=MODEL, input="Free threading?", tools=WEB)
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    search, opened, message = r.output
    assert isinstance(search, ResponseFunctionWebSearch) and search.action.type == "search"
    assert isinstance(opened, ResponseFunctionWebSearch) and opened.status == "completed"
    assert isinstance(opened.action, ActionOpenPage) and opened.action.url == url
    assert [t.name for t in engine.requests[0].tools] == ["web_search", "open_page", "find_in_page"]
    assert engine.requests[2].turns[-2] == ToolCall(opened.id, "open_page", json.dumps({"url": url}))
    assert read(engine) == (
        f"The Article\n{url}\n\nHome\n# Free threading\nPython 3.13 can run without the GIL.\n"
        "The needle is here.\n- first point\n- second NEEDLE point"
    )
    assert isinstance(message, ResponseOutputMessage)
    (citation,) = message.content[0].annotations  # type: ignore[union-attr]
    assert (citation.url, citation.title) == (url, "The Article")  # type: ignore[union-attr]


def test_the_stream_of_page_actions(live: LiveServer, engine: FakeEngine, web: FakeWeb) -> None:
    """Each page action streams as a search does: added, in_progress, searching, completed, done; its item and
    every event validate against the SDK's types."""
    url = f"{web.base}/plain"
    engine.reset(
        function_call("web_search", {"query": "plain"}),
        function_call("open_page", {"url": url}),
        function_call("find_in_page", {"url": url, "pattern": "second"}),
        say("Done."),
    )
    body = {"model": MODEL, "input": "q", "tools": WEB, "stream": True}
    events = parse_sse(httpx.post(live.base_url + "/v1/responses", json=body, timeout=60).text)
    check_stream(events)
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["item"]["action"]["type"] for e in added[:3]] == ["search", "open_page", "find_in_page"]
    for item_added in added[1:3]:
        index = item_added["output_index"]
        kinds = [e["type"] for e in events if e.get("output_index") == index]
        assert kinds == [
            "response.output_item.added",
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
            "response.output_item.done",
        ]
    done = [
        validate_as(ResponseFunctionWebSearch, e["item"])
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "web_search_call"
    ]
    assert isinstance(done[1].action, ActionOpenPage) and done[1].action.url == url
    assert isinstance(done[2].action, ActionFind)
    assert (done[2].action.url, done[2].action.pattern) == (url, "second")
    assert engine.requests[2].turns[-1].output == f"{url}\n\nJust text.\nSecond line."  # type: ignore[union-attr]
    assert engine.requests[3].turns[-1].output == (  # type: ignore[union-attr]
        f"1 match for 'second' in {url}:\n\n[1] Just text. Second line."
    )


def test_find_in_page_finds_passages_or_says_none(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb
) -> None:
    """Passages holding the pattern (any case), numbered, a little text either side; a page past what
    open_page shows is searched whole; no match is said, no pattern is the call's error; each page is fetched
    once per response."""
    article, long = f"{web.base}/article", f"{web.base}/long"
    engine.reset(
        function_call("web_search", {"query": "article long"}),
        function_call("find_in_page", {"url": article, "pattern": "needle"}),
        function_call("find_in_page", {"url": article, "pattern": "zebra"}),
        function_call("open_page", {"url": long}),
        function_call("find_in_page", {"url": long, "pattern": "lonely  ZEBRA"}),
        function_call("find_in_page", {"url": long, "pattern": " "}),
        say("Found."),
    )
    before = web.fetched.copy()
    r = client.responses.create(model=MODEL, input="q", tools=WEB)
    assert r.status == "completed"
    assert [item.status for item in r.output[:6]] == ["completed"] * 5 + ["failed"]  # type: ignore[union-attr]
    assert read(engine, 2) == (
        f"2 matches for 'needle' in {article}:\n\n[1] Home # Free threading Python 3.13 can run without the GIL. "
        "The needle is here. - first point - second NEEDLE point"
    )
    assert read(engine, 3) == f"No match for 'zebra' in {article}."
    opened = read(engine, 4)
    assert opened.startswith(f"{long}\n\nword word") and "zebra" not in opened
    assert opened.endswith(f"[... {len(LONG) - 6000} more characters; find_in_page searches the whole page]")
    found = read(engine, 5)
    assert found.startswith(f"1 match for 'lonely  ZEBRA' in {long}:\n\n[1] …word word")
    assert found.endswith("the lonely zebra at the end.")
    assert read(engine, 6) == "Error: find_in_page needs a pattern to look for."
    assert web.fetched - before == collections.Counter({"/article": 1, "/long": 1})


def test_a_url_not_among_the_results_is_refused(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb
) -> None:
    """A page is opened only by the URL of a search result the model was shown: another page of the same
    site, a result's URL with something added to it, or any URL before a search, fail as the call's error and
    nothing is fetched; the response goes on."""
    said = (
        "Error: only the URL of a search result shown above can be opened, as the results write it; "
        "search first."
    )
    engine.reset(
        function_call("open_page", {"url": f"{web.base}/article"}),
        function_call("web_search", {"query": "article"}),
        function_call("open_page", {"url": f"{web.base}/plain"}),
        function_call("find_in_page", {"url": f"{web.base}/article?q=the+user+secret", "pattern": "x"}),
        function_call("open_page", {"url": "file:///etc/passwd"}),
        say("Refused."),
    )
    before = web.fetched.copy()
    r = client.responses.create(model=MODEL, input="q", tools=WEB)
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert r.status == "completed"
    assert [item.status for item in r.output[:5]] == ["failed", "completed", "failed", "failed", "failed"]  # type: ignore[union-attr]
    assert [read(engine, i) for i in (1, 3, 4, 5)] == [said] * 4
    assert web.fetched == before


def test_a_private_address_is_refused_without_the_setting(web: FakeWeb) -> None:
    """Without `--web-search-page-allow-private-networks`, a result on 127.0.0.1 is not fetched: the call fails
    and the model reads that the address is not allowed."""
    config = Config(web_search_url=f"{web.base}/search", web_search_timeout=1.0)
    server = LiveServer(config, FakeEngine(), FakeInterpreter()).start()
    try:
        url = f"{web.base}/article"
        server.engine.reset(
            function_call("web_search", {"query": "article"}),
            function_call("open_page", {"url": url}),
            say("Refused."),
        )
        before = web.fetched.copy()
        body = {"model": MODEL, "input": "q", "tools": WEB}
        r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "completed"
        assert [item["status"] for item in r.json()["output"][:2]] == ["completed", "failed"]
        assert read(server.engine) == "Error: the page could not be opened (its address is not allowed)."
        assert web.fetched == before
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("page", "said"),
    [
        ("big", "Error: the page could not be opened (it is too large)."),
        ("bomb", "Error: the page could not be opened (it is too large)."),
        ("brotli", "Error: the page could not be read (sent as br)."),
        ("slow", "Error: the page could not be opened (no answer in time)."),
        ("pdf", "Error: the page could not be read (application/pdf is neither HTML nor text)."),
        ("missing", "Error: the page could not be opened (HTTP 4xx)."),
        ("away", "Error: the page could not be opened (it redirected to another site)."),
    ],
)
def test_a_page_that_cannot_be_read_is_the_calls_error(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb, page: str, said: str
) -> None:
    """Over 2 MiB (sent so, or unpacked from a small gzip body), no answer within --web-search-timeout, an
    encoding not read, neither HTML nor text, an HTTP error, a redirect to another site: the call fails, the
    model reads why (naming no address), and the response goes on."""
    engine.reset(
        function_call("web_search", {"query": page}),
        function_call("open_page", {"url": f"{web.base}/{page}"}),
        say("It failed."),
    )
    r = client.responses.create(model=MODEL, input="q", tools=WEB)
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert r.status == "completed" and r.output[1].status == "failed"  # type: ignore[union-attr]
    assert read(engine) == said
    assert r.output[2].type == "message"


@pytest.mark.parametrize("page", ["moved", "gzipped"])
def test_a_redirect_within_the_site_is_followed_and_gzip_read(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb, page: str
) -> None:
    url = f"{web.base}/{page}"
    engine.reset(
        function_call("web_search", {"query": page}), function_call("open_page", {"url": url}), say("ok")
    )
    r = client.responses.create(model=MODEL, input="q", tools=WEB)
    assert r.output[1].status == "completed"  # type: ignore[union-attr]
    assert read(engine).startswith(f"The Article\n{url}\n\nHome\n# Free threading")


def test_page_actions_given_back_read_as_the_first_time(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb
) -> None:
    """The text a page action showed is kept with the server's copy of its item: given back through
    `previous_response_id`, in a conversation, or resent as input items, the model reads the same calls and
    text, and a page of the earlier results can still be opened."""
    article, plain = f"{web.base}/article", f"{web.base}/plain"
    scripted = [
        function_call("web_search", {"query": "article plain"}),
        function_call("open_page", {"url": article}),
        function_call("find_in_page", {"url": article, "pattern": "needle"}),
    ]
    engine.reset(*scripted, say("Read it."))
    first = client.responses.create(model=MODEL, input="q", tools=WEB)
    seen = list(engine.requests[3].turns[1:])  # the calls and what they read, after the user's message
    assert [t.name for t in seen if isinstance(t, ToolCall)] == ["web_search", "open_page", "find_in_page"]

    engine.reset(function_call("open_page", {"url": plain}), say("ok"))
    client.responses.create(model=MODEL, input="and?", tools=WEB, previous_response_id=first.id)
    assert list(engine.requests[0].turns[1:7]) == seen
    assert read(engine) == f"{plain}\n\nJust text.\nSecond line."  # a result of the earlier search

    engine.reset(say("ok"))
    conversation = client.conversations.create()
    engine.reset(*scripted, say("Read it."))
    client.responses.create(model=MODEL, input="q", tools=WEB, conversation=conversation.id)
    in_conversation = list(engine.requests[3].turns[1:])
    engine.reset(say("ok"))
    client.responses.create(model=MODEL, input="and?", tools=WEB, conversation=conversation.id)
    assert list(engine.requests[0].turns[1:7]) == in_conversation
    assert (
        [t.output for t in in_conversation if isinstance(t, ToolResult)][1:]
        == [  # the same pages read
            t.output for t in seen if isinstance(t, ToolResult)
        ][1:]
    )

    engine.reset(say("ok"))
    resent = [item.model_dump(mode="json", exclude_none=True) for item in first.output]
    given = [{"role": "user", "content": "q"}, *resent, {"role": "user", "content": "and?"}]
    client.responses.create(model=MODEL, input=given, tools=WEB)  # type: ignore[arg-type]
    assert list(engine.requests[0].turns[1:7]) == seen


def test_page_actions_not_kept_read_as_not_kept(live: LiveServer, engine: FakeEngine, web: FakeWeb) -> None:
    """A page action's item the server did not keep (`store: false`, or another server's) reads as its call and
    a note that its text was not kept; a failed one as a failure."""
    items = [
        {
            "type": "web_search_call",
            "id": "ws_a",
            "status": "completed",
            "action": {"type": "open_page", "url": "https://a.test/"},
        },
        {
            "type": "web_search_call",
            "id": "ws_b",
            "status": "failed",
            "action": {"type": "find_in_page", "url": "https://a.test/", "pattern": "p"},
        },
    ]
    engine.reset(say("ok"))
    body = {"model": MODEL, "input": [*items, {"role": "user", "content": "q"}], "tools": WEB}
    r = httpx.post(live.base_url + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert list(engine.requests[0].turns[:4]) == [
        ToolCall("ws_a", "open_page", '{"url": "https://a.test/"}'),
        ToolResult("ws_a", "open_page", "(the text this page showed was not kept)"),
        ToolCall("ws_b", "find_in_page", '{"url": "https://a.test/", "pattern": "p"}'),
        ToolResult("ws_b", "find_in_page", "Error: the page could not be opened."),
    ]


def test_the_sdk_stream_helper_and_no_proxy(
    client: openai.OpenAI, engine: FakeEngine, web: FakeWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's own stream accumulator takes the page actions' events (it raises on an event out of place);
    HTTP_PROXY in the server's environment does not carry the page's fetch: it goes straight to the page."""
    with proxy_trap(monkeypatch) as proxied:
        url = f"{web.base}/article"
        engine.reset(
            function_call("web_search", {"query": "article"}),
            function_call("find_in_page", {"url": url, "pattern": "GIL"}),
            say(f"See {url}."),
        )
        plain = openai.OpenAI(
            base_url=client.base_url,
            api_key="unused",
            max_retries=0,
            http_client=httpx.Client(trust_env=False),
        )
        with plain, plain.responses.stream(model=MODEL, input="q", tools=WEB) as stream:  # type: ignore[arg-type]
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        assert kinds.count("response.web_search_call.completed") == 2
        found = final.output[1]
        assert isinstance(found, ResponseFunctionWebSearch) and isinstance(found.action, ActionFind)
        assert found.status == "completed" and found.action.pattern == "GIL"
        assert proxied == []
        assert read(engine).startswith(f"1 match for 'GIL' in {url}:")

"""The web search's page actions: `open_page` (a search result's page, its text shown) and `find_in_page` (the
passages of that page that hold a pattern), each a `web_search_call` item.

A page is opened only when its URL (normalised) is among the search results the model reads in its context
(this response's searches, or the kept results of earlier `web_search_call`s given back): a model told by a
page or a snippet to open a URL it wrote itself cannot carry the conversation's text away in it. The fetch
goes through the same guard as other URLs the server fetches (tools/net_guard.py: the host resolved once,
special addresses refused unless `--web-search-page-allow-private-networks`, the connection pinned, no proxy
of the environment), follows redirects within the same scheme, host and port only, and is bounded in time
(`--web-search-timeout`) and bytes (`MAX_PAGE_BYTES`); its text is extracted off the event loop (page_text.py)
and each page is fetched once per response. Every failure is the call's error, read by the model as a short
text naming no more than what kind of failure it was.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_responses.builder.citations import WebSource
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.searches import FIND_IN_PAGE_NAME, OPEN_PAGE_NAME, shown_result_urls
from vllm_responses.engine.types import ToolCall, ToolResult, ToolSpec, Turn
from vllm_responses.executors import SEARCH, run_on
from vllm_responses.protocol.events import Event
from vllm_responses.tools.net_guard import Refused, UrlPolicy, normal_url, pinned_transport
from vllm_responses.tools.page_text import NotText, PageText, page_text

__all__ = ["MAX_PAGE_BYTES", "PageRun", "find_text", "open_text", "page_specs"]

logger = logging.getLogger(__name__)

# The most of a page read; past it the page is not opened.
MAX_PAGE_BYTES = 2 * 1024 * 1024
_MAX_REDIRECTS = 5
# `find_in_page`: the characters shown either side of a match, and the most passages shown.
_AROUND = 150
_PASSAGES = 10
_COUNTED = 1000  # matches counted at most
# The Content-Encodings a page may come in (it is asked for `identity`).
_ENCODINGS = frozenset({"identity", "", "gzip", "x-gzip", "deflate"})
_TOO_LARGE = "the page could not be opened (it is too large)"
_NO_ADDRESS = "the host does not resolve"  # net_guard's reason for a host with no address
_HEADERS = {
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
    "Accept-Encoding": "identity",
    "User-Agent": "vllm-responses (web_search open_page)",
}


def page_specs() -> list[ToolSpec]:
    """`open_page` and `find_in_page`, offered beside `web_search`: one plain function each (a URL; a URL and
    a pattern), which a small model calls as readily as the search itself."""
    url = {"type": "string", "description": "The URL of a search result, exactly as the results show it."}
    return [
        ToolSpec(
            OPEN_PAGE_NAME,
            "Open a web page from the search results and read its text. Only the URL of a search result can "
            "be opened; cite the page by its URL.",
            {"type": "object", "properties": {"url": url}, "required": ["url"]},
            web_search=True,
        ),
        ToolSpec(
            FIND_IN_PAGE_NAME,
            "Find a word or phrase in a web page from the search results: you get the passages that hold it.",
            {
                "type": "object",
                "properties": {
                    "url": url,
                    "pattern": {"type": "string", "description": "The text to look for (any case)."},
                },
                "required": ["url", "pattern"],
            },
            web_search=True,
        ),
    ]


@dataclass(frozen=True)
class Page:
    """A page opened: the URL it was opened by, its title and text (page_text.py)."""

    url: str
    title: str
    text: str


class _Failed(Exception):
    """A page that could not be opened: `reason` is what the model reads, `detail` is logged."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail or reason


class PageRun:
    """Runs the page actions of one response's loop: its pages, fetched once each (or why they failed), by
    normalised URL. `policy`: where pages may be fetched from; `timeout_s` bounds each fetch; `chars`, the
    most of a page's text `open_page` shows."""

    def __init__(self, policy: UrlPolicy, timeout_s: float, chars: int) -> None:
        self.policy = policy
        self.timeout_s = timeout_s
        self.chars = chars
        self._pages: dict[str, Page | _Failed] = {}

    async def run(
        self, builder: ResponseBuilder, index: int, call_name: str, arguments: str, turns: list[Turn]
    ) -> AsyncIterator[Event]:
        """Open (or search) the page of the call at `index`: its events, then the call and what the model
        reads of it added to `turns`; a page opened is cited where a later message mentions its URL."""
        args = _arguments(arguments, call_name)
        action = {"type": call_name, **args}
        for ev in builder.web_search.searching(index, action):
            yield ev
        if call_name == FIND_IN_PAGE_NAME and not args["pattern"].split():
            outcome: Page | _Failed = _Failed("find_in_page needs a pattern to look for")
        else:
            outcome = await self._page(args["url"], turns)
        if isinstance(outcome, Page):
            builder.note_sources([WebSource(outcome.url, outcome.title or outcome.url)])
            if call_name == OPEN_PAGE_NAME:
                text = open_text(outcome, self.chars)
            else:
                text = find_text(outcome, args["pattern"], self.chars)
        else:
            text = f"Error: {outcome.reason}."
        for ev in builder.web_search.done(index, None, text, failed=not isinstance(outcome, Page)):
            yield ev
        call_id = builder.state.web_search_call(index)["id"]
        turns.append(ToolCall(call_id, call_name, json.dumps(args)))
        turns.append(ToolResult(call_id, call_name, text))

    async def _page(self, url: str, turns: Sequence[Turn]) -> Page | _Failed:
        """The page at `url` (from this response's cache, else fetched), or why it cannot be had."""
        if not url:
            return _Failed("the call gave no URL")
        key = _normal(url)
        if key is None or key not in {_normal(shown) for shown in shown_result_urls(turns)}:
            return _Failed(
                "only the URL of a search result shown above can be opened, as the results write it; "
                "search first"
            )
        if key not in self._pages:
            try:
                self._pages[key] = await self._fetch(url)
            except _Failed as exc:
                logger.warning("opening the page %s failed: %s", url, exc.detail)
                self._pages[key] = exc
        return self._pages[key]

    async def _fetch(self, url: str) -> Page:
        """The page at `url`, fetched within the limits and its text extracted; raises `_Failed`."""
        try:
            async with asyncio.timeout(self.timeout_s):
                raw, encoding, content_type = await self._download(url)
        except TimeoutError:
            raise _Failed("the page could not be opened (no answer in time)") from None
        try:
            text = await run_on(SEARCH, _readable, raw, encoding, content_type)
        except NotText as exc:
            media = exc.media_type if re.fullmatch(r"[\w.+-]+/[\w.+-]+", exc.media_type) else "it"
            raise _Failed(f"the page could not be read ({media} is neither HTML nor text)") from None
        return Page(url, text.title, text.text)

    async def _download(self, url: str) -> tuple[bytes, str, str | None]:
        """The body of a 2xx answer to GET `url` as sent (at most `MAX_PAGE_BYTES`), its Content-Encoding and
        its Content-Type."""
        import httpx2

        try:
            pinned = await self.policy.pin(url)
        except Refused as exc:
            why = "the site could not be reached" if str(exc) == _NO_ADDRESS else "its address is not allowed"
            raise _Failed(f"the page could not be opened ({why})", str(exc)) from None
        try:
            async with httpx2.AsyncClient(
                transport=pinned_transport(pinned),
                trust_env=False,
                follow_redirects=True,
                max_redirects=_MAX_REDIRECTS,
                timeout=self.timeout_s,
            ) as client:
                async with client.stream("GET", pinned.target.url, headers=_HEADERS) as response:
                    if not response.is_success:
                        code = response.status_code
                        raise _Failed(f"the page could not be opened (HTTP {code // 100}xx)", f"HTTP {code}")
                    encoding = response.headers.get("content-encoding", "identity").strip().lower()
                    if encoding not in _ENCODINGS:
                        raise _Failed(f"the page could not be read (sent as {encoding or 'it'})")
                    body = bytearray()
                    async for chunk in response.aiter_raw():  # decoded (bounded) by `_readable`
                        body += chunk
                        if len(body) > MAX_PAGE_BYTES:
                            raise _Failed(_TOO_LARGE, f"over {MAX_PAGE_BYTES} bytes")
                    return bytes(body), encoding, response.headers.get("content-type")
        except Refused as exc:
            raise _Failed("the page could not be opened (it redirected to another site)", str(exc)) from None
        except httpx2.TooManyRedirects as exc:
            raise _Failed("the page could not be opened (too many redirects)", str(exc)) from None
        except httpx2.TimeoutException as exc:
            raise _Failed("the page could not be opened (no answer in time)", repr(exc)) from None
        except (httpx2.HTTPError, OSError) as exc:
            raise _Failed("the page could not be opened (the site could not be reached)", repr(exc)) from None


def _readable(raw: bytes, encoding: str, content_type: str | None) -> PageText:
    """A page's text from its body as sent: decompressed (gzip or deflate, to at most `MAX_PAGE_BYTES`: a small
    body that would unpack past it is too large), then read (page_text.py); raises `_Failed` or `NotText`."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        try:
            unpacker = zlib.decompressobj(32 + zlib.MAX_WBITS)  # a gzip or zlib header, found
            body = unpacker.decompress(raw, MAX_PAGE_BYTES + 1)
        except zlib.error:
            raise _Failed("the page could not be read (its compression is broken)") from None
        if len(body) > MAX_PAGE_BYTES:
            raise _Failed(_TOO_LARGE)
        raw = body
    return page_text(raw, content_type)


def _normal(url: str) -> str | None:
    """`url` in its normal form (net_guard.py), or None when it is not an http(s) URL read one way only."""
    try:
        return normal_url(url.strip()).url
    except Refused:
        return None


def _arguments(arguments: str, call_name: str) -> dict[str, str]:
    """A page call's `url` (and, for `find_in_page`, `pattern`) from its arguments ("" where missing; a bare
    string that is not JSON is the URL)."""
    try:
        value: Any = json.loads(arguments)
    except ValueError:
        value = {"url": arguments}
    if not isinstance(value, dict):
        value = {"url": value if isinstance(value, str) else ""}
    args = {"url": str(value.get("url") or "").strip()}
    if call_name == FIND_IN_PAGE_NAME:
        args["pattern"] = str(value.get("pattern") or value.get("query") or "")
    return args


def open_text(page: Page, chars: int) -> str:
    """What the model reads of a page opened: its title, URL and the first `chars` characters of its text
    (what is left said, with the way to reach it: `find_in_page`)."""
    head = f"{page.title}\n{page.url}" if page.title else page.url
    if not page.text:
        return f"{head}\n\n(the page has no readable text)"
    shown = page.text[:chars]
    more = len(page.text) - len(shown)
    tail = f"\n\n[... {more} more characters; find_in_page searches the whole page]" if more else ""
    return f"{head}\n\n{shown}{tail}"


def find_text(page: Page, pattern: str, chars: int) -> str:
    """What the model reads of a search in a page: how many matches `pattern` has (plain text, any case, any
    whitespace between its words; counted up to `_COUNTED`) and the passages that hold the first ones,
    numbered, each with a little text either side, at most `_PASSAGES` of them and about `chars` characters
    in all; or that it has none."""
    text = page.text
    passages: list[str] = []
    count, shown_to = 0, -1
    for match in re.finditer(r"\s+".join(map(re.escape, pattern.split())), text, re.IGNORECASE):
        count += 1
        if count > _COUNTED:
            break
        full = len(passages) == _PASSAGES or sum(map(len, passages)) >= chars
        if full or match.start() < shown_to:  # shown enough, or within the last passage
            continue
        start, end = max(0, match.start() - _AROUND), min(len(text), match.end() + _AROUND)
        passage = " ".join(text[start:end].split())
        passages.append(
            f"[{len(passages) + 1}] {'…' if start else ''}{passage}{'…' if end < len(text) else ''}"
        )
        shown_to = end
    if not count:
        return f"No match for {pattern!r} in {page.url}."
    many = f"more than {_COUNTED} matches" if count > _COUNTED else f"{count} match{'es' * (count != 1)}"
    return f"{many} for {pattern!r} in {page.url}:\n\n" + "\n\n".join(passages)

"""The `web_search` tool, run by the server against a SearXNG-compatible JSON API (`--web-search-url`): offered to
the model as a function taking a query; each call searched, its results shown to the model and kept for
`url_citation`s; without a backend (or with `external_web_access: false`) the tool is not offered. A search is
bounded in time and bytes, uses no proxy of the environment, and fails with a text naming no URL;
`filters.allowed_domains` go to the backend as `site:` terms and are enforced on its results, and
`user_location.country` goes as its `language`. Beside the search the model is offered its page actions,
`open_page` and `find_in_page`, on the pages of the results it was shown (tools/web_pages.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from vllm_responses.builder.citations import WebSource
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.searches import WEB_SEARCH_NAME
from vllm_responses.engine.types import ToolCall, ToolResult, ToolSpec, Turn
from vllm_responses.executors import SEARCH, run_on
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.inputs import WebSearchTool
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.web_search_options import search_options
from vllm_responses.tools.net_guard import UrlPolicy
from vllm_responses.tools.search_language import search_language
from vllm_responses.tools.web_pages import PageRun, page_specs

__all__ = [
    "MAX_ANSWER_BYTES",
    "SEARCH_TOOL_NAME",
    "SearchPlan",
    "SearchRun",
    "search_plan",
    "search_specs",
    "web_search_spec",
]

logger = logging.getLogger(__name__)

SEARCH_TOOL_NAME = WEB_SEARCH_NAME
# How many results a search shows the model, by the tool's `search_context_size` (default medium).
_RESULTS = {"low": 3, "medium": 5, "high": 10}
# How many characters of a page `open_page` shows the model, by the same size.
_PAGE_CHARS = {"low": 3000, "medium": 6000, "high": 12000}
_SNIPPET_CHARS = 500
# The most of a backend's answer read (SearXNG's run to tens of KiB); past it the search fails.
MAX_ANSWER_BYTES = 2 * 1024 * 1024
_HEADERS = {"Accept": "application/json", "Accept-Encoding": "identity"}


def web_search_spec() -> ToolSpec:
    return ToolSpec(
        SEARCH_TOOL_NAME,
        "Search the web. You get back the top results (title, URL, snippet); cite a result by its URL.",
        {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to search for."}},
            "required": ["query"],
        },
        web_search=True,
    )


def search_specs() -> list[ToolSpec]:
    """The tools a served web search offers the model: `web_search`, then its page actions."""
    return [web_search_spec(), *page_specs()]


@dataclass(frozen=True)
class SearchPlan:
    """Where a response's searches go: the backend's URL, a timeout (of a search, and of a page's fetch), how
    many results each shows the model, the domains they are limited to (none: any), the backend's
    `language` (None: its default), how much of a page `open_page` shows, and whether pages on special
    addresses (loopback, private networks) may be opened."""

    url: str
    timeout_s: float
    results: int
    domains: tuple[str, ...] = ()
    language: str | None = None
    page_chars: int = _PAGE_CHARS["medium"]
    private_networks: bool = False


def search_plan(
    req: CreateResponseRequest, url: str | None, timeout_s: float, private_networks: bool = False
) -> SearchPlan | None:
    """The response's search plan: None (the tool not offered) without a backend, without a `web_search` tool,
    or when the tool asks for no live web access (`external_web_access: false`: there is no cached index)."""
    tool = next((t for t in req.tools if isinstance(t, WebSearchTool)), None)
    if url is None or tool is None or tool.external_web_access is False:
        return None
    options = search_options(tool, f"tools[{req.tools.index(tool)}]")
    size = tool.search_context_size or "medium"
    language = search_language(options.country)
    return SearchPlan(
        url, timeout_s, _RESULTS[size], options.domains, language, _PAGE_CHARS[size], private_networks
    )


@dataclass(frozen=True)
class Found:
    """One search's outcome: its results, or why it failed (`error`, as the model reads it: no URL)."""

    sources: list[WebSource]
    snippets: list[str]
    error: str | None = None


class _Failed(Exception):
    """A search that failed: `reason` is what the model reads, `detail` (the backend's URL and error) is logged."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


async def search(plan: SearchPlan, query: str) -> Found:
    """`GET url?q=query&format=json` (SearXNG's JSON API) within `plan.timeout_s` in all, its answer read up to
    `MAX_ANSWER_BYTES` and parsed off the event loop; every failure a `Found` whose `error` names only its kind
    (the URL, which may hold a token, and the error itself go to the log)."""
    try:
        async with asyncio.timeout(plan.timeout_s):
            body = await _fetch(plan, query)
        sources, snippets = await run_on(SEARCH, _results, body, plan.results, plan.domains)
    except TimeoutError:
        failed = _Failed("no answer in time", f"no answer within {plan.timeout_s:g} s")
    except _Failed as exc:
        failed = exc
    else:
        return Found(sources, snippets)
    logger.warning("web search %r at %s failed: %s", query, plan.url, failed.detail)
    return Found([], [], f"the web search failed ({failed.reason})")


async def _fetch(plan: SearchPlan, query: str) -> bytes:
    """The backend's answer to `query`: a 2xx body of at most `MAX_ANSWER_BYTES` (no redirect followed, no proxy
    of the environment used); raises `_Failed`."""
    try:
        async with httpx.AsyncClient(
            timeout=plan.timeout_s, follow_redirects=False, trust_env=False
        ) as client:
            params = _params(plan, query)
            async with client.stream("GET", plan.url, params=params, headers=_HEADERS) as r:
                if not r.is_success:
                    raise _Failed(f"HTTP {r.status_code // 100}xx", f"HTTP {r.status_code}")
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise _Failed("the answer was too large", f"an answer over {MAX_ANSWER_BYTES} bytes")
                return bytes(body)
    except httpx.TimeoutException as exc:
        raise _Failed("no answer in time", f"{type(exc).__name__}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise _Failed("the search backend could not be reached", f"{type(exc).__name__}: {exc}") from exc


def _params(plan: SearchPlan, query: str) -> dict[str, str]:
    """The backend's query parameters: `q` (with `site:` terms, OR-ed, where domains are allowed), `format`,
    and `language` where the plan has one."""
    sites = " OR ".join(f"site:{domain}" for domain in plan.domains)
    q = f"{query} ({sites})" if len(plan.domains) > 1 else f"{query} {sites}".rstrip()
    params = {"q": q, "format": "json"}
    if plan.language is not None:
        params["language"] = plan.language
    return params


def _allowed(url: str, domains: tuple[str, ...]) -> bool:
    """Whether `url` is on one of `domains` or a subdomain of one (any URL, without domains)."""
    if not domains:
        return True
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == d or host.endswith(f".{d}") for d in domains)


def _results(body: bytes, most: int, domains: tuple[str, ...] = ()) -> tuple[list[WebSource], list[str]]:
    """The first `most` results of a SearXNG JSON answer on `domains` (any, without): their sources and
    snippets; raises `_Failed`."""
    try:
        results = json.loads(body).get("results", [])
    except (ValueError, AttributeError) as exc:
        raise _Failed("the answer was not JSON results", f"{type(exc).__name__}: {exc}") from exc
    sources: list[WebSource] = []
    snippets: list[str] = []
    for result in results if isinstance(results, list) else []:
        if (
            isinstance(result, dict)
            and isinstance(result.get("url"), str)
            and _allowed(result["url"], domains)
        ):
            sources.append(WebSource(result["url"], str(result.get("title") or result["url"])))
            snippets.append(str(result.get("content") or "")[:_SNIPPET_CHARS])
        if len(sources) == most:
            break
    return sources, snippets


def result_text(query: str, found: Found) -> str:
    """What the model reads of a search: numbered results (title, URL, snippet, a line each: the URL a page
    action may open is the line after its `[i] title` line, context/searches.py), or the failure."""
    if found.error is not None:
        return f"Error: {found.error}."
    if not found.sources:
        return f"No results for {query!r}."
    return "\n\n".join(
        f"[{i}] {_line(s.title)}\n{_line(s.url)}\n{_line(snippet)}".rstrip()
        for i, (s, snippet) in enumerate(zip(found.sources, found.snippets, strict=True), 1)
    )


def _line(text: str) -> str:
    """`text` on one line: its runs of whitespace (line breaks too) made one space."""
    return " ".join(text.split())


def _query(arguments: str) -> str:
    """The query of a call's arguments (a bare string, or text that is not JSON, is the query itself)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments.strip()
    if isinstance(value, dict):
        value = value.get("query", value.get("q", ""))
    return value.strip() if isinstance(value, str) else json.dumps(value)


class SearchRun:
    """Runs the searches and page actions of one response's loop."""

    def __init__(self, plan: SearchPlan) -> None:
        self.plan = plan
        policy = UrlPolicy(("*",), plan.private_networks)
        self.pages = PageRun(policy, plan.timeout_s, plan.page_chars)

    async def run(
        self, builder: ResponseBuilder, index: int, call_name: str, arguments: str, turns: list[Turn]
    ) -> AsyncIterator[Event]:
        """Search for the call at `index` (or, for a page action, open or search its page: `PageRun`): its
        events, then the call and its results added to `turns`."""
        if call_name != SEARCH_TOOL_NAME:
            async for ev in self.pages.run(builder, index, call_name, arguments, turns):
                yield ev
            return
        query = _query(arguments)
        for ev in builder.web_search.searching(index, {"type": "search", "query": query}):
            yield ev
        found = await search(self.plan, query) if query else Found([], [], "the call gave no query")
        builder.note_sources(found.sources)
        sources = [s.url for s in found.sources]  # kept; on the wire where the client asks (builder)
        text = result_text(query, found)
        for ev in builder.web_search.done(index, sources, text, failed=found.error is not None):
            yield ev
        call_id = builder.state.web_search_call(index)["id"]
        turns.append(ToolCall(call_id, call_name, json.dumps({"query": query})))
        turns.append(ToolResult(call_id, call_name, text))

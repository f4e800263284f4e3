"""`web_search` served by a search backend (`--web-search-url`: a local fake of SearXNG's JSON API on 127.0.0.1)
over the scripted engine: the model's call searched, its `web_search_call` item and events as the SDK types them,
the results shown to the model, `url_citation`s where the answer mentions a result's URL, `action.sources`
when included, failures and timeouts as a failed call the model reads; and when the tool is not offered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseFunctionWebSearch, ResponseOutputMessage

from tests.support.fakes import FakeEngine, FakeInterpreter, function_call, say
from tests.support.searx import RESULTS, FakeSearx
from tests.support.serving import LiveServer, proxy_trap
from tests.support.wire import check_stream, parse_sse, validate_as, validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import ForcedTool, ToolCall, ToolResult

MODEL = "fake-model"
WEB: list[Any] = [{"type": "web_search"}]


@pytest.fixture(scope="module")
def live(searx: FakeSearx) -> Iterator[LiveServer]:
    config = Config(web_search_url=searx.url, web_search_timeout=1.0)
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


ANSWER = "Python 3.13 adds a JIT (https://docs.python.org/3/whatsnew/3.13.html) and PEP 703."


def test_a_search_its_item_results_and_citations(
    client: openai.OpenAI, engine: FakeEngine, searx: FakeSearx
) -> None:
    engine.reset(function_call("web_search", {"query": "python 3.13 news"}), say(ANSWER))
    r = client.responses.create(model=MODEL, input="What is new in 3.13?", tools=WEB)
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    call, message = r.output
    assert isinstance(call, ResponseFunctionWebSearch) and call.status == "completed"
    assert call.action.type == "search" and call.action.query == "python 3.13 news"  # type: ignore[union-attr]
    assert call.action.sources is None  # type: ignore[union-attr]  (not included)
    assert searx.queries[-1] == {"q": ["python 3.13 news"], "format": ["json"]}
    # The model was offered the search as a function, and read the results (5 at most: medium context).
    first, second = engine.requests
    assert [t.name for t in first.tools] == ["web_search", "open_page", "find_in_page"]  # tools/web_pages.py
    assert second.turns[-2] == ToolCall(call.id, "web_search", '{"query": "python 3.13 news"}')
    result = second.turns[-1]
    assert isinstance(result, ToolResult) and result.output.startswith(
        "[1] What's New In Python 3.13\nhttps://"
    )
    assert "[3] Other" in result.output and "x" * 501 not in result.output  # snippets cut
    assert isinstance(message, ResponseOutputMessage)
    (citation,) = message.content[0].annotations  # type: ignore[union-attr]
    start = ANSWER.index("https://")
    assert citation.model_dump() == {
        "type": "url_citation",
        "url": RESULTS[0]["url"],
        "title": RESULTS[0]["title"],
        "start_index": start,
        "end_index": start + len(RESULTS[0]["url"]),
    }


def test_the_stream_and_the_sources_when_included(live: LiveServer, engine: FakeEngine) -> None:
    engine.reset(
        function_call("web_search", {"query": "pep 703"}), say("See https://peps.python.org/pep-0703/.")
    )
    body = {
        "model": MODEL,
        "input": "free threading?",
        "tools": [{"type": "web_search", "search_context_size": "low"}],
        "include": ["web_search_call.action.sources"],
        "stream": True,
    }
    events = parse_sse(httpx.post(live.base_url + "/v1/responses", json=body, timeout=60).text)
    check_stream(events)
    kinds = [
        e["type"] for e in events if "web_search" in e["type"] or e["type"].startswith("response.output_item")
    ]
    assert kinds[:5] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    done = validate_as(
        ResponseFunctionWebSearch, next(e for e in events if e["type"] == "response.output_item.done")["item"]
    )
    assert [s.url for s in done.action.sources] == [r["url"] for r in RESULTS]  # low: 3 results
    added = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert [a["annotation"]["url"] for a in added] == ["https://peps.python.org/pep-0703/"]


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("boom", "Error: the web search failed (HTTP 5xx)."),
        ("slow", "Error: the web search failed (no answer in time)."),
        ("huge", "Error: the web search failed (the answer was too large)."),
        ("drip", "Error: the web search failed (no answer in time)."),
    ],
)
def test_a_failing_search_is_a_failed_call_the_model_reads(
    client: openai.OpenAI, engine: FakeEngine, query: str, said: str
) -> None:
    """A 500, no answer within --web-search-timeout (a slow backend, or one sending a byte at a time: the
    timeout bounds the whole search, not each read), or an answer over 2 MiB: the call fails and the model
    reads why, in a text that names no URL."""
    engine.reset(function_call("web_search", {"query": query}), say("The search failed."))
    r = openai.OpenAI(base_url=client.base_url, api_key="unused", max_retries=0, timeout=20).responses.create(
        model=MODEL, input="q", tools=WEB
    )
    assert r.status == "completed" and r.output[0].status == "failed"  # type: ignore[union-attr]
    assert engine.requests[1].turns[-1].output == said  # type: ignore[union-attr]


def test_no_results_and_a_bare_query_string(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(function_call("web_search", {"q": "nothing here"}), say("Nothing."))
    client.responses.create(model=MODEL, input="q", tools=WEB)
    assert engine.requests[1].turns[-1] == ToolResult(
        engine.requests[1].turns[-1].call_id,
        "web_search",
        "No results for 'nothing here'.",  # type: ignore[union-attr]
    )


def test_no_live_access_asked_is_not_offered(client: openai.OpenAI, engine: FakeEngine) -> None:
    """Codex's `external_web_access: false` asks for cached results only; there is no cache here."""
    engine.reset(say("ok"))
    client.responses.create(
        model=MODEL, input="q", tools=[{"type": "web_search", "external_web_access": False}]
    )
    assert engine.requests[0].tools == ()


def test_without_a_backend_the_tool_is_not_offered(client: openai.OpenAI, fake_server: LiveServer) -> None:
    fake_server.engine.reset(say("ok"))
    plain = openai.OpenAI(base_url=fake_server.base_url + "/v1", api_key="unused", max_retries=0)
    r = plain.responses.create(model=MODEL, input="q", tools=WEB, include=["web_search_call.action.sources"])
    assert r.status == "completed" and fake_server.engine.requests[0].tools == ()


def test_a_backend_url_with_a_token_never_reaches_the_model_or_the_client(
    searx: FakeSearx, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed search tells the model (and so the response) only what kind of failure it was: the backend's
    URL, token and address stay in the server's log."""
    url = f"{searx.url}?key=s3cret-key"
    server = LiveServer(
        Config(web_search_url=url, web_search_timeout=1.0), FakeEngine(), FakeInterpreter()
    ).start()
    try:
        server.engine.reset(function_call("web_search", {"query": "boom"}), say("It failed."))
        body = {"model": MODEL, "input": "q", "tools": WEB}
        with caplog.at_level("WARNING", logger="vllm_responses.tools.web_search"):
            r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=30)
        assert r.status_code == 200 and r.json()["output"][0]["status"] == "failed"
        seen = server.engine.requests[1].turns[-1].output
        host = f"127.0.0.1:{searx.server.server_port}"
        for text in (seen, r.text):
            assert "s3cret" not in text and host not in text and "/search" not in text
        assert seen == "Error: the web search failed (HTTP 5xx)."
        assert any("s3cret-key" in m and "HTTP 500" in m for m in caplog.messages)  # the operator's detail
    finally:
        server.stop()


def test_the_proxy_of_the_environment_is_not_used(
    live: LiveServer, engine: FakeEngine, searx: FakeSearx, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY in the server's environment does not carry searches (nor the query) to another host: the
    search goes straight to --web-search-url."""
    with proxy_trap(monkeypatch) as proxied:
        engine.reset(function_call("web_search", {"query": "proxied query"}), say("ok"))
        body = {"model": MODEL, "input": "q", "tools": WEB}
        r = httpx.post(live.base_url + "/v1/responses", json=body, timeout=30, trust_env=False)
        assert r.status_code == 200
        assert proxied == []
        assert r.json()["output"][0]["status"] == "completed"
        assert searx.queries[-1]["q"] == ["proxied query"]


@pytest.mark.parametrize(
    ("tool", "choice"),
    [
        ("web_search", "web_search_preview"),
        ("web_search_preview", "web_search_preview"),
        ("web_search", "web_search"),
        ("web_search_2025_08_26", "web_search_preview_2025_03_11"),
    ],
)
def test_tool_choice_forces_the_search(
    client: openai.OpenAI, engine: FakeEngine, tool: str, choice: str
) -> None:
    """A `tool_choice` of any of the search's types forces the first model call to be the search, as a forced
    code interpreter is forced; later calls choose freely."""
    engine.reset(function_call("web_search", {"query": "forced"}), say("Done."))
    r = client.responses.create(
        model=MODEL,
        input="q",
        tools=[{"type": tool}],  # type: ignore[list-item]
        tool_choice={"type": choice},  # type: ignore[arg-type,misc]
    )
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    assert r.output[0].type == "web_search_call" and r.output[0].status == "completed"
    assert [req.tool_choice for req in engine.requests] == [ForcedTool("web_search"), "auto"]
    # Echoed as sent, under a type the SDK has (its ToolChoiceTypes names only the preview types).
    assert r.tool_choice.type == (choice if "preview" in choice else "web_search_preview")  # type: ignore[union-attr]


def test_a_forced_search_that_cannot_be_made_is_a_400(live: LiveServer, fake_server: LiveServer) -> None:
    """Forcing the search with no `web_search` tool, with no backend, or with no live web access asked: a 400
    naming `tool_choice`, before any model call."""
    forced = {"type": "web_search_preview"}
    cases = [
        (live, [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "not in tools"),
        (fake_server, WEB, "no search backend"),
        (live, [{"type": "web_search", "external_web_access": False}], "no live web access"),
    ]
    for server, tools, said in cases:
        server.engine.reset(say("never"))
        body = {"model": MODEL, "input": "q", "tools": tools, "tool_choice": forced}
        r = httpx.post(server.base_url + "/v1/responses", json=body, timeout=30)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["param"] == "tool_choice" and said in error["message"]
        assert error["type"] == "invalid_request_error"
        assert server.engine.requests == []


FUNCTION = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}


def test_allowed_tools_names_the_search(client: openai.OpenAI, engine: FakeEngine) -> None:
    """`allowed_tools` naming the search (by any of its types) offers it, and only the tools it names;
    `mode: required` forces a call to one of them. Naming only a function leaves the search out."""
    engine.reset(function_call("web_search", {"query": "allowed"}), say("Done."))
    allowed = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search_preview"}]}
    r = client.responses.create(
        model=MODEL,
        input="q",
        tools=[*WEB, FUNCTION],  # type: ignore[list-item]
        tool_choice=allowed,  # type: ignore[arg-type]
    )
    assert r.status == "completed" and r.output[0].type == "web_search_call"
    first = engine.requests[0]
    assert [t.name for t in first.tools] == ["web_search", "open_page", "find_in_page"]
    assert first.tool_choice == "required"
    engine.reset(say("No search."))
    only_function = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "lookup"}],
    }
    client.responses.create(
        model=MODEL,
        input="q",
        tools=[*WEB, FUNCTION],  # type: ignore[list-item]
        tool_choice=only_function,  # type: ignore[arg-type]
    )
    assert [t.name for t in engine.requests[0].tools] == ["lookup"]


@pytest.mark.parametrize(
    ("domains", "sent", "kept"),
    [
        (["python.org"], "docs site:python.org", [RESULTS[0]["url"], RESULTS[1]["url"]]),
        (
            ["https://PEPS.python.org/", "example.com"],
            "docs (site:peps.python.org OR site:example.com)",
            [RESULTS[1]["url"], RESULTS[2]["url"]],
        ),
    ],
)
def test_allowed_domains_go_to_the_backend_and_limit_the_results(
    client: openai.OpenAI,
    engine: FakeEngine,
    searx: FakeSearx,
    domains: list[str],
    sent: str,
    kept: list[str],
) -> None:
    """`filters.allowed_domains`: SearXNG is asked with `site:` per domain (OR-ed), and a result from another
    domain (the backend may ignore `site:`) is dropped; a subdomain of an allowed domain is kept."""
    engine.reset(function_call("web_search", {"query": "docs"}), say("Done."))
    r = client.responses.create(
        model=MODEL,
        input="q",
        tools=[{"type": "web_search", "filters": {"allowed_domains": domains}}],
        include=["web_search_call.action.sources"],
    )
    assert searx.queries[-1]["q"] == [sent]
    assert [s.url for s in r.output[0].action.sources] == kept  # type: ignore[union-attr]
    read = engine.requests[1].turns[-1].output  # type: ignore[union-attr]
    assert all(url in read for url in kept) and read.count("https://") == len(kept)
    assert r.tools[0].filters.allowed_domains == domains  # type: ignore[union-attr]  (echoed as sent)


@pytest.mark.parametrize(("country", "language"), [("CH", ["de-CH"]), ("jp", ["ja-JP"]), ("ZZ", None)])
def test_user_location_country_is_the_backends_language(
    client: openai.OpenAI, engine: FakeEngine, searx: FakeSearx, country: str, language: list[str] | None
) -> None:
    """`user_location.country` goes to SearXNG as its `language` (the country's main language with it); a
    country the server has no language for sends none; city, region and timezone are not sent."""
    engine.reset(function_call("web_search", {"query": "weather"}), say("Done."))
    location = {"type": "approximate", "country": country, "city": "Bern", "timezone": "Europe/Zurich"}
    client.responses.create(
        model=MODEL,
        input="q",
        tools=[{"type": "web_search_preview", "user_location": location}],  # type: ignore[list-item]
    )
    assert searx.queries[-1].get("language") == language
    assert set(searx.queries[-1]) <= {"q", "format", "language"}


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        (
            {"filters": {"allowed_domains": ["python.org", "not a domain"]}},
            "tools[0].filters.allowed_domains[1]",
        ),
        ({"filters": {"allowed_domains": "python.org"}}, "tools[0].filters.allowed_domains"),
        ({"user_location": {"type": "approximate", "country": "USA"}}, "tools[0].user_location.country"),
        ({"user_location": {"type": "exact"}}, "tools[0].user_location.type"),
    ],
)
def test_bad_filters_or_location_are_a_400(live: LiveServer, tool: dict[str, Any], param: str) -> None:
    body = {"model": MODEL, "input": "q", "tools": [{"type": "web_search", **tool}]}
    r = httpx.post(live.base_url + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_the_results_include_shows_the_sources(live: LiveServer, engine: FakeEngine) -> None:
    """`include: ["web_search_call.results"]` is served: the SDK's `web_search_call` has no field of its own for
    results, so they are shown where it types them, the URLs in `action.sources` (also on a retrieve)."""
    engine.reset(function_call("web_search", {"query": "results"}), say("Done."))
    body = {"model": MODEL, "input": "q", "tools": WEB, "include": ["web_search_call.results"]}
    r = httpx.post(live.base_url + "/v1/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    validate_response(r.json())
    call = validate_as(ResponseFunctionWebSearch, r.json()["output"][0])
    urls = [r["url"] for r in RESULTS]
    assert [s.url for s in call.action.sources] == urls  # type: ignore[union-attr]
    got = httpx.get(
        f"{live.base_url}/v1/responses/{r.json()['id']}",
        params={"include[]": "web_search_call.results"},
        timeout=30,
    )
    assert got.status_code == 200, got.text
    assert [s["url"] for s in got.json()["output"][0]["action"]["sources"]] == urls

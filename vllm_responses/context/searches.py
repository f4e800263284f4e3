"""Searches as the model reads them: a web search's call and its results (a page opened or searched: its call and
text), which result URLs the model has been shown, a tool search's call and the tools it found (each described
as the model is offered it), for the items given back as for the server's own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Union

import pydantic

from vllm_responses.engine.types import ToolCall, ToolResult, Turn
from vllm_responses.protocol.inputs import CustomTool, FunctionTool, NamespaceTool, model_tool_name
from vllm_responses.protocol.items import SEARCH_RESULTS, SearchActionType
from vllm_responses.protocol.tool_search_items import ToolSearchCallInput, ToolSearchOutputInput
from vllm_responses.protocol.web_search_items import SearchAction, WebSearchCallInput

__all__ = [
    "FIND_IN_PAGE_NAME",
    "NOT_KEPT",
    "OPEN_PAGE_NAME",
    "PAGE_NOT_KEPT",
    "SEARCH_ACTIONS",
    "WEB_SEARCH_NAME",
    "shown_result_urls",
    "tool_description",
    "tool_search_call_turn",
    "tool_search_output_turn",
    "tools_found_text",
    "web_search_turns",
]

# The names the web search and its page actions are offered to the model under (tools/web_search.py,
# tools/web_pages.py), and the `action.type` of each one's `web_search_call` item.
WEB_SEARCH_NAME = "web_search"
OPEN_PAGE_NAME = "open_page"
FIND_IN_PAGE_NAME = "find_in_page"
SEARCH_ACTIONS: dict[str, SearchActionType] = {
    WEB_SEARCH_NAME: "search",
    OPEN_PAGE_NAME: "open_page",
    FIND_IN_PAGE_NAME: "find_in_page",
}
_NAMES = {action: name for name, action in SEARCH_ACTIONS.items()}
# What the model reads of a search whose results the server did not keep and the item does not list.
NOT_KEPT = "(the results of this search were not kept)"
# What it reads of a page action whose text the server did not keep.
PAGE_NOT_KEPT = "(the text this page showed was not kept)"
# A result's head line as `tools/web_search.result_text` writes it (`[i] title`, then the URL on the next
# line), or a result's URL alone (`[i] url`, an item's sources where its results were not kept).
_RESULT_HEAD = re.compile(r"^\[\d+\] (.*)$")

_DEFINITION: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
    Union[FunctionTool, CustomTool, NamespaceTool]  # (tagged by `type`)
)


def web_search_turns(raw: Mapping[str, Any]) -> list[Turn]:
    """A `web_search_call` item as the model read it: its call (`web_search` with `{"query": ...}`, or
    `open_page` / `find_in_page` with the action's `url` and `pattern`), then what it read, as the server
    kept it when it ran the call (`SEARCH_RESULTS`); else what the item itself holds (its failure, or its
    `action.sources`' URLs), else `NOT_KEPT` (`PAGE_NOT_KEPT`)."""
    call = WebSearchCallInput.model_validate(raw)
    action = call.action
    if isinstance(action, SearchAction):
        arguments: dict[str, Any] = {"query": action.query or " ".join(action.queries or [])}
    else:
        arguments = {k: v for k, v in action.model_dump(exclude_none=True).items() if k != "type"}
    kept = raw.get(SEARCH_RESULTS)
    results = kept if isinstance(kept, str) else _from_item(call)
    name = _NAMES[action.type]
    return [ToolCall(call.id, name, json.dumps(arguments)), ToolResult(call.id, name, results)]


def _from_item(call: WebSearchCallInput) -> str:
    """What an item whose results were not kept says of them: that it failed, or its sources' URLs."""
    page = not isinstance(call.action, SearchAction)
    if call.status == "failed":
        return "Error: the page could not be opened." if page else "Error: the web search failed."
    sources = call.action.sources if isinstance(call.action, SearchAction) else None
    if sources:
        return "\n\n".join(f"[{i}] {source.url}" for i, source in enumerate(sources, 1))
    return PAGE_NOT_KEPT if page else NOT_KEPT


def shown_result_urls(turns: Iterable[Turn]) -> list[str]:
    """The URLs of the web search results the model reads in `turns`, in order: of each `web_search` call's
    results, each result's head line's text (`[i] url`) and the line after it (`[i] title`, then the URL);
    the caller drops what is not a URL. What a page or another tool showed is not counted."""
    urls: list[str] = []
    for turn in turns:
        if not isinstance(turn, ToolResult) or turn.name != WEB_SEARCH_NAME:
            continue
        lines = turn.output.split("\n")
        for i, line in enumerate(lines):
            if (head := _RESULT_HEAD.match(line)) is None:
                continue
            urls.append(head.group(1).strip())
            if i + 1 < len(lines):
                urls.append(lines[i + 1].strip())
    return urls


def tool_description(tool: FunctionTool | CustomTool, namespace: NamespaceTool | None = None) -> str:
    """A function or custom tool's description as the model is offered it: a custom tool's grammar noted
    after it, a namespace's name and description before it."""
    description = tool.description or ""
    grammar = tool.grammar if isinstance(tool, CustomTool) else None
    if grammar is not None:
        kind = "regular expression" if grammar.syntax == "regex" else "Lark grammar"
        note = f"Its input must match this {kind}:\n{grammar.definition}"
        description = f"{description}\n\n{note}" if description else note
    if namespace is not None:
        description = f"[{namespace.name}: {namespace.description}] {description}".strip()
    return description


def tool_search_call_turn(raw: Mapping[str, Any]) -> Turn:
    """A `tool_search_call` item as the model made it: a call of `tool_search` with its arguments."""
    call = ToolSearchCallInput.model_validate(raw)
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    return ToolCall(call.key, "tool_search", arguments)


def tool_search_output_turn(raw: Mapping[str, Any]) -> Turn:
    """What a tool search found, as the model reads it (tools/tool_search.py writes the same for its own): each
    tool under the name and with the description it is offered with."""
    out = ToolSearchOutputInput.model_validate(raw)
    found = [entry for tool in out.tools for entry in _found(tool)]
    return ToolResult(out.call_id or out.id or "", "tool_search", tools_found_text(found))


def _found(definition: dict[str, Any]) -> list[tuple[str, str]]:
    """A found tool's (name, description) as offered; a definition this server does not know, as written."""
    try:
        tool = _DEFINITION.validate_python(definition)
    except pydantic.ValidationError:  # read as far as it goes
        namespace = str(definition.get("name")) if definition.get("type") == "namespace" else None
        inner = definition.get("tools") if namespace else [definition]
        return [
            (model_tool_name(str(t.get("name")), namespace), str(t.get("description") or ""))
            for t in (inner if isinstance(inner, list) else [])
            if isinstance(t, dict)
        ]
    if isinstance(tool, NamespaceTool):
        return [(model_tool_name(t.name, tool.name), tool_description(t, tool)) for t in tool.tools]
    return [(tool.name, tool_description(tool))]


def tools_found_text(found: Iterable[tuple[str, str]]) -> str:
    """What the model reads of a tool search: the tools now available (name and description), or that none
    matched (for a search the server ran, and for a `tool_search_output` sent back)."""
    lines = [f"- {name}: {description}".rstrip(": ") for name, description in found]
    return "Tools now available:\n" + "\n".join(lines) if lines else "No tool matched; try other words."

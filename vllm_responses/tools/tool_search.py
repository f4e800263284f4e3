"""Tool search: function and custom tools given with `defer_loading: true` stay out of the prompt until a
`tool_search` call finds them. The server runs the search over their names and descriptions (or, with
`execution: "client"`, the client does and answers with a `tool_search_output`); the tools found, and those of
`tool_search_output` / `additional_tools` items in the context, are offered from then on. A request defers at
most `--max-deferred-tools`; its tools are indexed once, and searched, in a worker thread, off the event loop."""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.searches import tools_found_text
from vllm_responses.engine.types import ToolCall, ToolResult, ToolSpec, Turn
from vllm_responses.executors import SEARCH, run_on
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.inputs import CustomTool, FunctionTool, NamespaceTool, Tool
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.tool_search_items import ToolSearchTool
from vllm_responses.tools.functions import client_tool_spec

__all__ = ["TOOL_SEARCH_NAME", "DeferredTool", "ToolSearch", "loaded_tools", "tool_search_of"]

TOOL_SEARCH_NAME = "tool_search"
FOUND_AT_MOST = 5
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "Words that describe the tool you need."}},
    "required": ["query"],
}
_TOOL: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Tool)


@dataclass(frozen=True)
class DeferredTool:
    """A tool kept out of the prompt: its definition as given (a namespaced one inside its namespace) and how
    the model is offered it once found."""

    definition: dict[str, Any]
    spec: ToolSpec
    words: frozenset[str]  # the words of its name and description: what a search matches

    def score(self, words: set[str]) -> int:
        """How many of the query's words its name and description hold."""
        return len(words & self.words)


def _deferred(definition: dict[str, Any], spec: ToolSpec) -> DeferredTool:
    return DeferredTool(definition, spec, frozenset(_words(f"{spec.name} {spec.description}")))


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) > 1]


@dataclass(frozen=True)
class ToolSearch:
    """A request's tool search: its deferred tools, who runs the search, and the tool the model is offered."""

    deferred: tuple[DeferredTool, ...]
    execution: str  # "server" or "client"
    spec: ToolSpec

    def find(self, query: str) -> list[DeferredTool]:
        """The deferred tools best matching `query` (at most `FOUND_AT_MOST`, none matching no word)."""
        words = set(_words(query))
        scored = [(score, i) for i, t in enumerate(self.deferred) if (score := t.score(words)) > 0]
        return [
            self.deferred[i] for _, i in heapq.nsmallest(FOUND_AT_MOST, scored, key=lambda s: (-s[0], s[1]))
        ]

    async def run(
        self, builder: ResponseBuilder, arguments: str, turns: list[Turn]
    ) -> AsyncIterator[Event | DeferredTool]:
        """A server-run search: its call and output items (events), then each tool found (for the loop to
        offer); the call and what it found added to `turns`."""
        query = _query(arguments)
        found = await run_on(SEARCH, self.find, query)
        call_id, events = builder.calls.tool_search(
            {"query": query}, [t.definition for t in found], execution="server"
        )
        for ev in events:
            yield ev
        for tool in found:
            yield tool
        turns.append(ToolCall(call_id, TOOL_SEARCH_NAME, json.dumps({"query": query})))
        turns.append(
            ToolResult(
                call_id, TOOL_SEARCH_NAME, tools_found_text((t.spec.name, t.spec.description) for t in found)
            )
        )


def _query(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments.strip()
    if isinstance(value, dict):
        value = value.get("query", " ".join(str(v) for v in value.values()))
    return str(value).strip()


async def tool_search_of(req: CreateResponseRequest, max_deferred: int) -> ToolSearch | None:
    """The request's tool search: its deferred tools (at most `max_deferred`, else a 400 naming `tools`),
    indexed in a worker thread, and the tool the model is offered (None without a `tool_search` tool, when
    `defer_loading` changes nothing)."""
    tool = next((t for t in req.tools if isinstance(t, ToolSearchTool)), None)
    if tool is None:
        return None
    count = sum(
        len([inner for inner in entry.tools if inner.defer_loading])
        if isinstance(entry, NamespaceTool)
        else int(isinstance(entry, (FunctionTool, CustomTool)) and bool(entry.defer_loading))
        for entry in req.tools
    )
    if count > max_deferred:
        raise InvalidRequest(
            f"Too many deferred tools: {count} have defer_loading, at most {max_deferred} per request.",
            param="tools",
            code="too_many_tools",
        )
    deferred = await run_on(SEARCH, _deferred_tools, req)
    description = tool.description or (
        "Find more tools: search the tools you have not been shown yet by what they do. "
        "The tools it finds can be called from then on."
    )
    spec = ToolSpec(TOOL_SEARCH_NAME, description, tool.parameters or _PARAMETERS, tool_search=True)
    return ToolSearch(deferred, tool.execution or "server", spec)


def _deferred_tools(req: CreateResponseRequest) -> tuple[DeferredTool, ...]:
    """The request's tools given `defer_loading: true` (a namespaced one inside its namespace), indexed."""
    deferred = []
    for i, entry in enumerate(req.tools):
        if isinstance(entry, (FunctionTool, CustomTool)) and entry.defer_loading:
            definition = entry.model_dump(mode="json", exclude_none=True, by_alias=True)
            deferred.append(_deferred(definition, client_tool_spec(entry, f"tools[{i}]")))
        elif isinstance(entry, NamespaceTool):
            for j, inner in enumerate(entry.tools):
                if inner.defer_loading:
                    definition = {"type": "namespace", "name": entry.name, "description": entry.description}
                    definition["tools"] = [inner.model_dump(mode="json", exclude_none=True, by_alias=True)]
                    spec = client_tool_spec(inner, f"tools[{i}].tools[{j}]", entry)
                    deferred.append(_deferred(definition, spec))
    return tuple(deferred)


def loaded_tools(items: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The tools `tool_search_output` and `additional_tools` items of the context made available (the request
    models of their definitions; a definition this server does not know is skipped)."""
    loaded = []
    for item in items:
        if item.get("type") in ("tool_search_output", "additional_tools"):
            for definition in item.get("tools") or []:
                try:
                    loaded.append(_TOOL.validate_python(definition))
                except pydantic.ValidationError:
                    continue
    return loaded

"""The `file_search` tool, run by the server over the project's vector stores (retrieval/search.py): offered to
the model as a function taking `queries`; each call searched (at most `MAX_QUERIES` queries, each cut to
`MAX_QUERY_CHARS`), its results shown to the model under their file ids and names (context/file_results.py)
and kept on the call's item for the include and for `file_citation`s. The tool's vector stores, filters and
ranking options are checked when the request is planned (404 / 400 naming the field); a search that fails
then (the embedding model down, a store expired or deleted) is the call's `failed` status, and the loop goes
on."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.context.file_results import FILE_SEARCH_NAME, file_results_text
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.types import ToolCall, ToolResult, ToolSpec, Turn
from vllm_responses.protocol.errors import APIError, NotFound, Unavailable
from vllm_responses.protocol.events import Event
from vllm_responses.protocol.file_search_items import FileSearchTool
from vllm_responses.protocol.items import FileSearchResult
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.retrieval.filters import Filter, parse_filter
from vllm_responses.retrieval.ranking import Ranking, parse_max_num_results, parse_ranking_options
from vllm_responses.retrieval.search import (
    MAX_QUERIES,
    MAX_QUERY_CHARS,
    FoundChunk,
    VectorSearch,
    project_store,
)

__all__ = ["FileSearchPlan", "FileSearchRun", "call_queries", "file_search_plan", "file_search_spec"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULTS = 10


def file_search_spec() -> ToolSpec:
    return ToolSpec(
        FILE_SEARCH_NAME,
        "Search the user's files. You get back passages, each under its file id and file name. Cite a "
        "passage you use by writing its file id in square brackets right after the sentence, e.g. "
        "[file-abc123].",
        {
            "type": "object",
            "properties": {
                "queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "What to search for: one or more queries.",
                }
            },
            "required": ["queries"],
        },
        file_search=True,
    )


@dataclass(frozen=True)
class FileSearchPlan:
    """A response's file searches: whose (`project`), over which vector stores, with the tool's filters,
    ranking and most results, by `searcher`."""

    searcher: VectorSearch
    project: str
    vector_store_ids: tuple[str, ...]
    filters: Filter | None
    ranking: Ranking
    max_num_results: int


async def file_search_plan(
    req: CreateResponseRequest, searcher: VectorSearch | None, project: str
) -> FileSearchPlan | None:
    """The response's file search plan (None without a `file_search` tool): its options checked (a 400 naming
    `tools[i].filters`, `...ranking_options`, `...max_num_results`), each vector store `project`'s (a 404
    naming `tools[i].vector_store_ids[j]`); a 503 where the server has no vector stores."""
    tool = next((t for t in req.tools if isinstance(t, FileSearchTool)), None)
    if tool is None:
        return None
    param = f"tools[{req.tools.index(tool)}]"
    filters = None if tool.filters is None else parse_filter(tool.filters, f"{param}.filters")
    ranking = parse_ranking_options(
        tool.ranking_options, f"{param}.ranking_options", rankers=("auto", "default-2024-11-15")
    )
    most = parse_max_num_results(tool.max_num_results, f"{param}.max_num_results", DEFAULT_MAX_RESULTS)
    if searcher is None:
        raise Unavailable(
            "file_search is not served here: this server has no vector stores open.",
            code="vector_stores_unavailable",
        )
    for j, store_id in enumerate(tool.vector_store_ids):
        try:
            await project_store(searcher.rows, store_id, project)
        except NotFound as exc:
            raise NotFound(exc.message, param=f"{param}.vector_store_ids[{j}]") from None
    ids = tuple(dict.fromkeys(tool.vector_store_ids))
    return FileSearchPlan(searcher, project, ids, filters, ranking, most)


def call_queries(arguments: str) -> list[str]:
    """The queries of a call's arguments (`{"queries": [...]}`, or a `query` string, or text that is not JSON:
    the query itself): blank ones dropped, at most `MAX_QUERIES`, each cut to `MAX_QUERY_CHARS`."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = arguments
    if isinstance(value, dict):
        value = value.get("queries", value.get("query", ""))
    given = value if isinstance(value, list) else [value]
    queries = [q.strip()[:MAX_QUERY_CHARS] for q in given if isinstance(q, str) and q.strip()]
    return queries[:MAX_QUERIES]


def _result(found: FoundChunk) -> FileSearchResult:
    hit = found.hit
    return {
        "file_id": hit.file_id,
        "filename": found.filename,
        "score": hit.score,
        "text": hit.text,
        "attributes": dict(hit.attributes),
    }


class FileSearchRun:
    """Runs the file searches of one response's loop."""

    def __init__(self, plan: FileSearchPlan) -> None:
        self.plan = plan

    async def run(
        self, builder: ResponseBuilder, index: int, arguments: str, turns: list[Turn]
    ) -> AsyncIterator[Event]:
        """Search for the call at `index`: its events, then the call and what the model reads added to
        `turns`."""
        queries = call_queries(arguments)
        for ev in builder.file_search.searching(index, queries):
            yield ev
        results, error = await self._search(queries)
        for ev in builder.file_search.done(index, results):
            yield ev
        call_id = builder.state.file_search_call(index)["id"]
        turns.append(ToolCall(call_id, FILE_SEARCH_NAME, json.dumps({"queries": queries})))
        turns.append(ToolResult(call_id, FILE_SEARCH_NAME, file_results_text(results or [], error)))

    async def _search(self, queries: list[str]) -> tuple[list[FileSearchResult] | None, str | None]:
        """The results of `queries` (None, and why, when the search failed: the model reads why)."""
        if not queries:
            return None, "the call gave no query"
        plan = self.plan
        try:
            found = await plan.searcher.search(
                plan.project, plan.vector_store_ids, queries, filters=plan.filters, ranking=plan.ranking,
                max_num_results=plan.max_num_results,
            )  # fmt: skip
        except (APIError, EngineError) as exc:
            reason = exc.message
            logger.warning("file search %r failed: %s", queries, reason)
            return None, f"the file search failed ({reason})"
        return [_result(f) for f in found], None

"""Pydantic models of the `file_search` tool (the SDK's `FileSearchToolParam`) and of a `file_search_call` item
sent back as input (`ResponseFileSearchToolCallParam`); its filters and ranking are checked where the search
runs (tools/file_search.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vllm_responses.protocol.lenient import LenientModel

__all__ = [
    "FILE_SEARCH_RESULTS_INCLUDE",
    "MAX_FILE_SEARCH_STORES",
    "FileSearchCallInput",
    "FileSearchResultInput",
    "FileSearchTool",
]

FILE_SEARCH_RESULTS_INCLUDE = "file_search_call.results"
MAX_FILE_SEARCH_STORES = 16  # vector stores one file_search tool may name (ours: OpenAI's is not documented)


class FileSearchTool(LenientModel):
    """`file_search`: the vector stores searched, and the search's options (checked by tools/file_search.py)."""

    type: Literal["file_search"]
    vector_store_ids: list[str] = Field(min_length=1, max_length=MAX_FILE_SEARCH_STORES)
    filters: dict[str, Any] | None = None
    max_num_results: Any = None
    ranking_options: Any = None


class FileSearchResultInput(LenientModel):
    """One result of a `file_search_call` given back (every field optional, as the SDK types it)."""

    file_id: str | None = None
    filename: str | None = None
    score: float | None = None
    text: str | None = None
    attributes: dict[str, Any] | None = None


class FileSearchCallInput(LenientModel):
    """A file search the server ran, given back: shown to the model as the call and its results (the server's
    kept results where the item has none: context/references.py)."""

    type: Literal["file_search_call"]
    id: str
    queries: list[str] = Field(default_factory=list)
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"] | None = None
    results: list[FileSearchResultInput] | None = None

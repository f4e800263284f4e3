"""File searches as the model reads them: the call (`file_search` with its `queries`) and its results, each under
its file id and name, bounded in size; for the server's own calls and for the items given back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from vllm_responses.engine.types import ToolCall, ToolResult, Turn
from vllm_responses.protocol.file_search_items import FileSearchCallInput

__all__ = ["FILE_SEARCH_NAME", "MAX_SHOWN_CHARS", "file_results_text", "file_search_turns"]

# The name the file search is offered to the model under (tools/file_search.py).
FILE_SEARCH_NAME = "file_search"
# The most characters of results' text one search shows the model (shared among its results).
MAX_SHOWN_CHARS = 16_000
_MIN_EACH = 400  # a result's text is never cut shorter than this (fewer results are shown instead)
_NOT_KEPT = "(the results of this file search were not kept)"


def file_results_text(results: Sequence[Mapping[str, Any]], error: str | None = None) -> str:
    """What the model reads of a file search: each result numbered, with its file id, file name and score,
    then its text (all the texts within `MAX_SHOWN_CHARS`); or that none was found; or the failure."""
    if error is not None:
        return f"Error: {error}."
    if not results:
        return "No results: no passage of the files matched."
    each = max(MAX_SHOWN_CHARS // len(results), _MIN_EACH)
    shown = results[: max(MAX_SHOWN_CHARS // each, 1)]
    blocks = []
    for i, r in enumerate(shown, 1):
        text = str(r.get("text") or "")
        cut = text[:each] + (" [...]" if len(text) > each else "")
        score = r.get("score")
        scored = f" score: {score:.3f}" if isinstance(score, (int, float)) else ""
        blocks.append(
            f"[{i}] file_id: {r.get('file_id') or ''} filename: {r.get('filename') or ''}{scored}\n{cut}"
        )
    return "\n\n".join(blocks)


def file_search_turns(raw: Mapping[str, Any]) -> list[Turn]:
    """A `file_search_call` item as the model read it: its call (`file_search` with `{"queries": [...]}`), then
    its results (the item's own, or those the server kept: context/references.py), its failure, or a note that
    they were not kept."""
    call = FileSearchCallInput.model_validate(raw)
    if call.results is not None:
        text = file_results_text([r.model_dump() for r in call.results])
    elif call.status == "failed":
        text = file_results_text([], "the file search failed")
    else:
        text = _NOT_KEPT
    arguments = json.dumps({"queries": call.queries})
    return [ToolCall(call.id, FILE_SEARCH_NAME, arguments), ToolResult(call.id, FILE_SEARCH_NAME, text)]

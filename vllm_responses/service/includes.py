"""A retrieve's `include` (`GET /v1/responses/{id}?include[]=...`): the values it names replace the create's.

What each shows, from what the server kept of the response (its full items):
- `code_interpreter_call.outputs`: the code calls' `outputs` (else null);
- `web_search_call.action.sources` (or `web_search_call.results`): each search's `action.sources` (else left
  out);
- `file_search_call.results`: each file search's `results` (else null);
- `reasoning.encrypted_content`: each reasoning item's text sealed for the caller's project (else left out);
- `message.output_text.logprobs`: the logprobs the response computed (else `[]`): they are computed while
  the model writes, so only for a create that asked for them;
- `message.input_image.image_url`: nothing to do: kept input images always keep their `image_url`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, cast

from vllm_responses.protocol.file_search_items import FILE_SEARCH_RESULTS_INCLUDE
from vllm_responses.protocol.items import OutputItem, ResponseObject, wire_item
from vllm_responses.protocol.web_search_options import includes_sources

__all__ = ["full_items", "with_include"]


def with_include(
    response: ResponseObject, full: Sequence[OutputItem], include: Collection[str], seal: Callable[[str], str]
) -> ResponseObject:
    """`response` with its output made from its `full` items as `include` asks (see the module docstring)."""
    outputs = "code_interpreter_call.outputs" in include
    sources = includes_sources(include)
    results = FILE_SEARCH_RESULTS_INCLUDE in include
    output = [_shown(wire_item(item, outputs, sources, results), include, seal) for item in full]
    return {**response, "output": output}


def _shown(item: OutputItem, include: Collection[str], seal: Callable[[str], str]) -> OutputItem:
    """A reasoning item's `encrypted_content` and a message's logprobs, as `include` asks."""
    if item["type"] == "reasoning":
        reasoning = cast(dict[str, Any], {k: v for k, v in item.items() if k != "encrypted_content"})
        text = "".join(part.get("text", "") for part in reasoning.get("content") or [])
        if "reasoning.encrypted_content" in include and text:
            reasoning["encrypted_content"] = item.get("encrypted_content") or seal(text)
        return cast(OutputItem, reasoning)
    if item["type"] == "message" and "message.output_text.logprobs" not in include:
        content = [
            {**part, "logprobs": []} if part.get("type") == "output_text" else part
            for part in item["content"]
        ]
        return cast(OutputItem, {**item, "content": content})
    return item


def full_items(output: Sequence[OutputItem], history: Sequence[dict[str, Any]]) -> list[OutputItem]:
    """A kept response's output items as the server holds them: each from its history copy (full sources,
    outputs and reasoning), where it has one."""
    kept = {item.get("id"): item for item in history}
    return [cast(OutputItem, kept.get(item["id"], item)) for item in output]

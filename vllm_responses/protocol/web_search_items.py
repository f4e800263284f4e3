"""Pydantic model of a `web_search_call` item sent back as input (the SDK's `ResponseFunctionWebSearchParam`)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from vllm_responses.protocol.lenient import LenientModel

__all__ = ["WebSearchCallInput"]


class SearchSource(LenientModel):
    type: Literal["url"]
    url: str


class SearchAction(LenientModel):
    type: Literal["search"]
    query: str | None = None
    queries: list[str] | None = None
    sources: list[SearchSource] | None = None


class OpenPageAction(LenientModel):
    type: Literal["open_page"]
    url: str | None = None


class FindInPageAction(LenientModel):
    type: Literal["find_in_page"]
    url: str
    pattern: str


class WebSearchCallInput(LenientModel):
    """A web search the server ran (or another server did), given back: shown to the model as the call and its
    results (context/searches.py)."""

    type: Literal["web_search_call"]
    id: str
    action: Annotated[Union[SearchAction, OpenPageAction, FindInPageAction], Field(discriminator="type")]
    status: Literal["in_progress", "searching", "completed", "failed", "incomplete"] | None = None

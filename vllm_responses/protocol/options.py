"""Pydantic models of a create body's option objects: `text`, `reasoning`, `stream_options`, and the SDK's newer
`access_programs`, `background_options`, `prompt_cache_options` and `image` (docs/api.md says what each does)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from vllm_responses.protocol.lenient import LenientModel

__all__ = [
    "AccessPrograms",
    "BackgroundOptions",
    "ImageOptions",
    "PromptCacheOptions",
    "Reasoning",
    "StreamOptions",
    "TextConfig",
    "TextFormat",
]


class TextFormat(LenientModel):
    type: Literal["text", "json_schema", "json_object"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None
    description: str | None = None


class TextConfig(LenientModel):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class Reasoning(LenientModel):
    """`reasoning` (the SDK's `Reasoning`): `effort` and `summary` are used, the rest only checked."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None
    mode: str | None = None


class StreamOptions(LenientModel):
    include_obfuscation: bool | None = None


class AccessPrograms(LenientModel):
    cyber: Literal["standard", "daybreak_blue", "daybreak_red"] | None = None

    @field_validator("cyber")
    @classmethod
    def _standard_only(cls, v: str | None) -> str | None:
        if v not in (None, "standard"):
            raise ValueError("only the 'standard' access program exists here")
        return v


class BackgroundOptions(LenientModel):
    completion_window: Literal["soonest", "2h", "8h"] | None = None


class PromptCacheOptions(LenientModel):
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m", "12h"] | None = None
    comparison_response_id: str | None = None


class ImageOptions(LenientModel):
    context_compression: Literal["auto", "enabled", "disabled"] | None = None

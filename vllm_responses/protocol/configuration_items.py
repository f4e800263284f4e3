"""Input items that steer the response rather than show the model a turn: `configuration_update` (a reasoning
effort or text format for this response and those after it) and `compaction_trigger` (compact the context
first)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from vllm_responses.protocol.lenient import LenientModel
from vllm_responses.protocol.options import Reasoning, TextFormat

__all__ = ["CompactionTriggerInput", "ConfigurationUpdateInput", "UpdatedReasoning", "UpdatedText"]


class UpdatedReasoning(LenientModel):
    """The reasoning an update sets: only `effort`, as the SDK's type holds."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None


class UpdatedText(LenientModel):
    """The text format an update sets: plain text or a JSON schema, as the SDK's type holds."""

    format: TextFormat

    @model_validator(mode="after")
    def _text_or_schema(self) -> UpdatedText:
        if self.format.type == "json_object":
            raise ValueError("a configuration update's text.format is 'text' or 'json_schema'")
        if self.format.type == "json_schema" and (self.format.schema_ is None or not self.format.name):
            raise ValueError("text.format json_schema needs 'name' and 'schema'")
        return self


class ConfigurationUpdateInput(LenientModel):
    """`configuration_update` (`ResponseConfigurationUpdateItemParam`): each setting it carries holds from
    this point of the context on, until a later update replaces it."""

    type: Literal["configuration_update"]
    id: str | None = None
    reasoning: UpdatedReasoning | None = None
    text: UpdatedText | None = None

    def applied_to(self, reasoning: Reasoning | None) -> Reasoning | None:
        """`reasoning` with this update's effort, when it sets one."""
        if self.reasoning is None or self.reasoning.effort is None:
            return reasoning
        return (reasoning or Reasoning()).model_copy(update={"effort": self.reasoning.effort})


class CompactionTriggerInput(LenientModel):
    """`compaction_trigger`: the context is compacted before the response (the input's last item)."""

    type: Literal["compaction_trigger"]
    id: str | None = None

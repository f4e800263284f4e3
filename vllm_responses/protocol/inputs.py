"""Pydantic models of what a create request carries: its input items and its tools (and their `type` tags)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vllm_responses.protocol.compaction import CompactionInputItem

__all__ = [
    "INPUT_ITEM_TYPES",
    "TOOL_TYPES",
    "CodeInterpreterCallItem",
    "CodeInterpreterTool",
    "ContainerAuto",
    "ContentPart",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "InputItem",
    "ItemReference",
    "LenientModel",
    "MessageItem",
    "ReasoningItem",
    "Tool",
]


class LenientModel(BaseModel):
    """Accepts fields newer than ours (clients send them all the time); they are ignored."""

    model_config = ConfigDict(extra="allow")


class ContentPart(LenientModel):
    type: Literal["input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal"]
    text: str = ""
    refusal: str | None = None


class MessageItem(LenientModel):
    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[ContentPart]]
    id: str | None = None
    status: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text or (p.refusal or "") for p in self.content)


class FunctionCallItem(LenientModel):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(LenientModel):
    type: Literal["function_call_output"]
    call_id: str
    output: Union[str, list[ContentPart]]
    id: str | None = None
    status: str | None = None

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "".join(p.text for p in self.output)


class CodeInterpreterCallItem(LenientModel):
    type: Literal["code_interpreter_call"]
    id: str
    code: str | None = None
    container_id: str | None = None
    outputs: list[dict[str, Any]] | None = None
    status: str | None = None


class ReasoningItem(LenientModel):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[ContentPart] = Field(default_factory=list)
    content: list[ContentPart] | None = None


class ItemReference(LenientModel):
    type: Literal["item_reference"]
    id: str


InputItem = Annotated[
    Union[
        MessageItem,
        FunctionCallItem,
        FunctionCallOutputItem,
        CodeInterpreterCallItem,
        ReasoningItem,
        ItemReference,
        CompactionInputItem,
    ],
    Field(discriminator="type"),
]


class ContainerAuto(LenientModel):
    type: Literal["auto"]
    file_ids: list[str] | None = None
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None


class CodeInterpreterTool(LenientModel):
    type: Literal["code_interpreter"]
    container: Union[str, ContainerAuto] = Field(default_factory=lambda: ContainerAuto(type="auto"))

    @field_validator("container")
    @classmethod
    def _container_id(cls, v: Union[str, ContainerAuto]) -> Union[str, ContainerAuto]:
        if isinstance(v, str) and v != "auto" and not v.startswith("cntr_"):
            raise ValueError("container must be 'auto', {'type': 'auto'} or a container id ('cntr_...')")
        return v


class FunctionTool(LenientModel):
    type: Literal["function"]
    name: str = Field(pattern=r"^[a-zA-Z0-9_.-]{1,128}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


Tool = Annotated[Union[CodeInterpreterTool, FunctionTool], Field(discriminator="type")]


def _type_tags(union: Any) -> tuple[str, ...]:
    """The `type` values of a discriminated union's models (`Annotated[Union[...], Field(...)]`)."""
    (members, _field) = get_args(union)
    models = get_args(members)
    return tuple(tag for model in models for tag in get_args(model.model_fields["type"].annotation))


INPUT_ITEM_TYPES = _type_tags(InputItem)
TOOL_TYPES = _type_tags(Tool)

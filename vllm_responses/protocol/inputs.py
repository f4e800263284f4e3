"""Pydantic models of what a create request carries: its input items and its tools (and their `type` tags)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import Field, field_validator

from vllm_responses.protocol.coding_items import (
    ApplyPatchCallInput,
    ApplyPatchCallOutputInput,
    ApplyPatchTool,
    LocalShellCallInput,
    LocalShellCallOutputInput,
    LocalShellTool,
    ShellCallInput,
    ShellCallOutputInput,
    ShellTool,
)
from vllm_responses.protocol.compaction import CompactionInput
from vllm_responses.protocol.configuration_items import CompactionTriggerInput, ConfigurationUpdateInput
from vllm_responses.protocol.file_parts import InputFile
from vllm_responses.protocol.file_search_items import FileSearchCallInput, FileSearchTool
from vllm_responses.protocol.items import CodeStatus, ItemStatus
from vllm_responses.protocol.lenient import LenientModel
from vllm_responses.protocol.mcp_items import (
    McpApprovalRequestInput,
    McpApprovalResponseInput,
    McpCallInput,
    McpListToolsInput,
    McpTool,
)
from vllm_responses.protocol.tool_search_items import (
    AdditionalToolsInput,
    ToolSearchCallInput,
    ToolSearchOutputInput,
    ToolSearchTool,
)
from vllm_responses.protocol.web_search_items import WebSearchCallInput

__all__ = [
    "ASSISTANT_PART_TYPES",
    "INPUT_ITEM_TYPES",
    "TOOL_TYPES",
    "CodeInterpreterCallInput",
    "CodeInterpreterTool",
    "ContainerAuto",
    "CustomTool",
    "CustomToolCallInput",
    "CustomToolCallOutputInput",
    "ContentPart",
    "FunctionCallInput",
    "FunctionCallOutputInput",
    "FunctionTool",
    "InputImage",
    "InputItem",
    "ItemReferenceInput",
    "MessageInput",
    "NamespaceTool",
    "ReasoningInput",
    "Refusal",
    "Tool",
    "USER_PART_TYPES",
    "WebSearchTool",
    "model_tool_name",
    "public_tool_name",
]


# The content part types a message of each role may hold (input_audio is refused up front as unsupported;
# input_image is refused later when the served model reads text only; an input_file is read as text:
# tools/file_inputs.py).
USER_PART_TYPES = ("input_text", "input_image", "input_file")
ASSISTANT_PART_TYPES = ("output_text", "refusal")


class InputText(LenientModel):
    type: Literal["input_text"]
    text: str


class InputImage(LenientModel):
    """An image part: a data URL or http(s) URL in `image_url`, or a container file's `file_id`."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["low", "high", "auto", "original"] | None = None


class OutputTextInput(LenientModel):
    type: Literal["output_text"]
    text: str


class Refusal(LenientModel):
    type: Literal["refusal"]
    refusal: str


# A message's content part; which types a role may use is checked by `parse_create_request`.
ContentPart = Annotated[
    Union[InputText, InputImage, OutputTextInput, Refusal, InputFile], Field(discriminator="type")
]
# A function or custom tool call's output part (the SDK's list-of-parts form): text, an image, or a file read
# as text.
OutputPart = Annotated[Union[InputText, InputImage, InputFile], Field(discriminator="type")]


class MessageInput(LenientModel):
    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[ContentPart]]
    id: str | None = None
    status: ItemStatus | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(
            p.refusal if isinstance(p, Refusal) else p.text
            for p in self.content
            if not isinstance(p, InputImage)
        )

    def images(self) -> list[InputImage]:
        return [] if isinstance(self.content, str) else [p for p in self.content if isinstance(p, InputImage)]


class FunctionCallInput(LenientModel):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: ItemStatus | None = None
    namespace: str | None = None  # the call of a function of a `namespace` tool


def _output_text(output: str | list[OutputPart]) -> str:
    """A call output's text: the string, or its text parts joined."""
    return (
        output
        if isinstance(output, str)
        else "".join(p.text for p in output if not isinstance(p, InputImage))
    )


def _output_images(output: str | list[OutputPart]) -> list[InputImage]:
    """A call output's image parts."""
    return [] if isinstance(output, str) else [p for p in output if isinstance(p, InputImage)]


class FunctionCallOutputInput(LenientModel):
    type: Literal["function_call_output"]
    call_id: str
    output: Union[str, list[OutputPart]]
    id: str | None = None
    status: ItemStatus | None = None

    def text(self) -> str:
        return _output_text(self.output)

    def images(self) -> list[InputImage]:
        return _output_images(self.output)


class CustomToolCallInput(LenientModel):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None
    namespace: str | None = None  # the call of a custom tool of a `namespace` tool


class CustomToolCallOutputInput(LenientModel):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: Union[str, list[OutputPart]]
    id: str | None = None

    def text(self) -> str:
        return _output_text(self.output)

    def images(self) -> list[InputImage]:
        return _output_images(self.output)


class LogsOutputInput(LenientModel):
    type: Literal["logs"]
    logs: str


class ImageOutputInput(LenientModel):
    type: Literal["image"]
    url: str


CodeOutputInput = Annotated[Union[LogsOutputInput, ImageOutputInput], Field(discriminator="type")]


class CodeInterpreterCallInput(LenientModel):
    type: Literal["code_interpreter_call"]
    id: str
    code: str | None = None
    container_id: str | None = None
    outputs: list[CodeOutputInput] | None = None
    status: CodeStatus | None = None


class SummaryText(LenientModel):
    type: Literal["summary_text"]
    text: str


class ReasoningText(LenientModel):
    type: Literal["reasoning_text"]
    text: str


class ReasoningInput(LenientModel):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


class ItemReferenceInput(LenientModel):
    type: Literal["item_reference"]
    id: str


InputItem = Annotated[
    Union[
        MessageInput,
        FunctionCallInput,
        FunctionCallOutputInput,
        CustomToolCallInput,
        CustomToolCallOutputInput,
        CodeInterpreterCallInput,
        ReasoningInput,
        ItemReferenceInput,
        CompactionInput,
        McpListToolsInput,
        McpCallInput,
        McpApprovalRequestInput,
        McpApprovalResponseInput,
        ShellCallInput,
        ShellCallOutputInput,
        LocalShellCallInput,
        LocalShellCallOutputInput,
        ApplyPatchCallInput,
        ApplyPatchCallOutputInput,
        ToolSearchCallInput,
        ToolSearchOutputInput,
        AdditionalToolsInput,
        WebSearchCallInput,
        FileSearchCallInput,
        ConfigurationUpdateInput,
        CompactionTriggerInput,
    ],
    Field(discriminator="type"),
]


class NetworkPolicy(LenientModel):
    """A container's network: the sandbox has none, so `disabled` is what it is and an allow-list is refused."""

    type: Literal["disabled", "allowlist"]
    allowed_domains: list[str] | None = None

    @field_validator("type")
    @classmethod
    def _no_network(cls, v: str) -> str:
        if v != "disabled":
            raise ValueError("the sandbox has no network: only 'disabled' can be given")
        return v


class ContainerAuto(LenientModel):
    type: Literal["auto"]
    file_ids: list[str] | None = None
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
    network_policy: NetworkPolicy | None = None
    # (`skills`, which the SDK's code interpreter tool does not type, is read as an extra field and refused when
    # non-empty: `parse_create_request`)


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
    defer_loading: bool | None = None  # kept out of the prompt until a tool search finds it


class TextInputFormat(LenientModel):
    type: Literal["text"]


class GrammarInputFormat(LenientModel):
    """A custom tool's input grammar: Lark (as OpenAI's, a Lark grammar whose start rule is `start`) or a regex."""

    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str = Field(min_length=1)


class CustomTool(LenientModel):
    """A tool taking free-form text (`input`), optionally constrained by a grammar (tools/functions.py)."""

    type: Literal["custom"]
    name: str = Field(pattern=r"^[a-zA-Z0-9_.-]{1,128}$")
    description: str | None = None
    format: Annotated[Union[TextInputFormat, GrammarInputFormat], Field(discriminator="type")] | None = None
    defer_loading: bool | None = None  # kept out of the prompt until a tool search finds it

    @property
    def grammar(self) -> GrammarInputFormat | None:
        return self.format if isinstance(self.format, GrammarInputFormat) else None


def model_tool_name(name: str, namespace: str | None) -> str:
    """The name a tool is offered to the model under: a namespaced one's `{namespace}__{name}` (characters
    every chat template and call format takes, where the client's `namespace.name` has a dot that some
    refuse)."""
    return f"{namespace}__{name}" if namespace else name


def public_tool_name(name: str, namespace: str | None) -> str:
    """The name a client gives a tool in `tool_choice`: a namespaced one's `namespace.name` (openai-agents'
    qualified form)."""
    return f"{namespace}.{name}" if namespace else name


class NamespaceTool(LenientModel):
    """Function and custom tools grouped under a namespace (the SDK's `NamespaceTool`): offered to the model
    as `{namespace}__{name}`, their calls' items carrying `namespace` and the tool's own name."""

    type: Literal["namespace"]
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str
    tools: list[Annotated[Union[FunctionTool, CustomTool], Field(discriminator="type")]] = Field(min_length=1)


class WebSearchTool(LenientModel):
    """`web_search` and its dated and preview variants: accepted, and offered to the model only when the
    server has a search backend (docs/api.md says what happens without one)."""

    type: Literal[
        "web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"
    ]
    external_web_access: bool | None = None
    filters: dict[str, Any] | None = None
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: dict[str, Any] | None = None


Tool = Annotated[
    Union[
        CodeInterpreterTool,
        FunctionTool,
        CustomTool,
        McpTool,
        NamespaceTool,
        WebSearchTool,
        FileSearchTool,
        ShellTool,
        LocalShellTool,
        ApplyPatchTool,
        ToolSearchTool,
    ],
    Field(discriminator="type"),
]


def _type_tags(union: Any) -> tuple[str, ...]:
    """The `type` values of a discriminated union's models (`Annotated[Union[...], Field(...)]`)."""
    (members, _field) = get_args(union)
    models = get_args(members)
    return tuple(tag for model in models for tag in get_args(model.model_fields["type"].annotation))


INPUT_ITEM_TYPES = _type_tags(InputItem)
TOOL_TYPES = _type_tags(Tool)

"""Pydantic models of the `POST /v1/responses` body: what we accept, and a 400 naming the `param` for the rest."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import Field, Strict, ValidationError, field_validator

from vllm_responses.protocol.coding_items import ApplyPatchTool, LocalShellTool, ShellTool
from vllm_responses.protocol.compaction import ContextManagement
from vllm_responses.protocol.configuration_items import CompactionTriggerInput
from vllm_responses.protocol.containers import SKILLS_REFUSED
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.fields import check_known_fields
from vllm_responses.protocol.file_search_items import FileSearchTool
from vllm_responses.protocol.inputs import (
    ASSISTANT_PART_TYPES,
    INPUT_ITEM_TYPES,
    TOOL_TYPES,
    USER_PART_TYPES,
    CodeInterpreterTool,
    ContainerAuto,
    CustomTool,
    FunctionTool,
    InputItem,
    MessageInput,
    NamespaceTool,
    Tool,
    WebSearchTool,
    model_tool_name,
    public_tool_name,
)
from vllm_responses.protocol.invalid import invalid_request
from vllm_responses.protocol.lenient import LenientModel
from vllm_responses.protocol.mcp_items import McpTool
from vllm_responses.protocol.options import (
    AccessPrograms,
    BackgroundOptions,
    ImageOptions,
    PromptCacheOptions,
    Reasoning,
    StreamOptions,
    TextConfig,
)
from vllm_responses.protocol.tool_choice import (
    ToolChoiceAllowed,
    ToolChoiceBuiltin,
    ToolChoiceCoding,
    ToolChoiceCustom,
    ToolChoiceFileSearch,
    ToolChoiceFunction,
    ToolChoiceObject,
    ToolChoiceWebSearch,
    check_allowed_tools,
)
from vllm_responses.protocol.web_search_options import search_options

__all__ = ["SUPPORTED_INCLUDES", "CreateResponseRequest", "check_includes", "parse_create_request"]

logger = logging.getLogger(__name__)

SUPPORTED_INCLUDES = (
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
    "web_search_call.action.sources",  # honoured where a search backend serves web_search
    "web_search_call.results",  # the same: the SDK's web_search_call has no field of its own for results
    "message.output_text.logprobs",  # each output token's logprob, and `top_logprobs` alternatives
    "message.input_image.image_url",  # stored input images always keep their image_url (a data URL)
    "file_search_call.results",  # each file search's results (else null)
)
_KNOWN_INCLUDES = (
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
)


def check_includes(values: Sequence[str]) -> None:
    """Refuse an `include` value we do not honour (body of a create or query of a retrieve): `InvalidRequest`
    naming `include[i]`."""
    for i, value in enumerate(values):
        if value not in SUPPORTED_INCLUDES:
            known = "an include value this server does not support" if value in _KNOWN_INCLUDES else "unknown"
            raise InvalidRequest(
                f"include value {value!r} is {known}; supported: {', '.join(SUPPORTED_INCLUDES)}.",
                param=f"include[{i}]",
                code="unsupported_value",
            )


class CreateResponseRequest(LenientModel):
    model: str
    input: Union[str, list[InputItem]]
    instructions: str | None = None
    tools: list[Tool] = Field(default_factory=list)
    tool_choice: Union[Literal["none", "auto", "required"], ToolChoiceObject] = "auto"
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=16)  # OpenAI's minimum
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    stream: bool = False
    store: bool = True
    background: bool = False
    previous_response_id: str | None = None
    conversation: str | None = None  # an id, or {"id": ...} (read as the id)
    include: list[str] = Field(default_factory=list)
    metadata: dict[str, str] | None = None
    text: TextConfig | None = None
    reasoning: Reasoning | None = None
    user: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)  # alternatives per token, with the include
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    # Sent by Codex CLI (ids of its installation, session and turn): accepted, kept nowhere, no effect here.
    client_metadata: dict[str, Any] | None = None
    context_management: list[ContextManagement] | None = None  # compaction.py
    # SDK fields this server does not act on, checked as OpenAI checks them
    service_tier: Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"] | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    stream_options: StreamOptions | None = None
    access_programs: AccessPrograms | None = None  # only `standard`
    background_options: BackgroundOptions | None = None  # checked as OpenAI checks it; runs as soon as it can
    prompt_cache_options: PromptCacheOptions | None = None  # vLLM's prefix cache is automatic
    image: ImageOptions | None = None  # checked, no effect: each image goes to the model's processor as is
    # vendor extension: force output with vLLM structured outputs ({"regex"|"json"|"choice"|"grammar": ...});
    # a list gives one constraint per model call of the agent loop (the last one repeats).
    structured_outputs: Union[dict[str, Any], list[dict[str, Any]], None] = None
    # vLLM's own sampling extensions, as its `/v1/responses` accepts them (its `ResponsesRequest`), plus
    # `min_tokens` (as its chat completions accept it); passed to `SamplingParams` for every model call.
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0, le=1)
    repetition_penalty: float | None = Field(default=None, gt=0)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    stop: Union[str, list[str], None] = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)
    logit_bias: dict[Annotated[int, Strict(False)], float] | None = None  # JSON keys are strings
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True

    @field_validator("input", mode="before")
    @classmethod
    def _implied_types(cls, v: Any) -> Any:
        return [_implied_type(item) for item in v] if isinstance(v, list) else v

    @field_validator("conversation", mode="before")
    @classmethod
    def _conversation_id(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not isinstance(v.get("id"), str):
                raise ValueError("conversation must be a conversation id or {'id': 'conv_...'}")
            v = v["id"]
        if isinstance(v, str) and not v.startswith("conv"):  # as OpenAI: a malformed id is a 400, not a 404
            raise ValueError(f"{v!r}. Expected an ID that begins with 'conv'")
        return v

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is not None:
            if len(v) > 16:
                raise ValueError("metadata may hold at most 16 keys")
            if any(len(k) > 64 or len(val) > 512 for k, val in v.items()):
                raise ValueError("metadata keys are at most 64 characters and values at most 512")
        return v

    @property
    def wants_outputs(self) -> bool:
        return "code_interpreter_call.outputs" in self.include

    @property
    def summary(self) -> str | None:
        """`reasoning.summary` (or the deprecated `reasoning.generate_summary`): how reasoning is summarised."""
        r = self.reasoning
        return (r.summary or r.generate_summary) if r else None

    @property
    def wants_reasoning(self) -> bool:
        return "reasoning.encrypted_content" in self.include

    @property
    def code_tool(self) -> CodeInterpreterTool | None:
        return next((t for t in self.tools if isinstance(t, CodeInterpreterTool)), None)

    @property
    def function_tools(self) -> list[FunctionTool]:
        return [t for t in self.tools if isinstance(t, FunctionTool)]

    @property
    def custom_tools(self) -> list[CustomTool]:
        return [t for t in self.tools if isinstance(t, CustomTool)]

    @property
    def mcp_tools(self) -> list[McpTool]:
        return [t for t in self.tools if isinstance(t, McpTool)]

    @property
    def client_tools(self) -> list[tuple[str | None, FunctionTool | CustomTool]]:
        """The function and custom tools the client answers, in `tools` order, each with its namespace (None
        at the top level)."""
        found: list[tuple[str | None, FunctionTool | CustomTool]] = []
        for tool in self.tools:
            if isinstance(tool, (FunctionTool, CustomTool)):
                found.append((None, tool))
            elif isinstance(tool, NamespaceTool):
                found += [(tool.name, inner) for inner in tool.tools]
        return found

    @property
    def coding_tools(self) -> list[str]:
        """The types of the coding tools given (shell, local_shell, apply_patch), as the model is offered them."""
        return [t.type for t in self.tools if isinstance(t, (ShellTool, LocalShellTool, ApplyPatchTool))]

    def tool_names(self, kind: str) -> list[str]:
        """The names a `tool_choice` may give for the client's tools of `kind` ("function" or "custom"): a
        top-level tool's name, a namespaced one's `namespace.name`."""
        return [public_tool_name(t.name, ns) for ns, t in self.client_tools if t.type == kind]


_UNSUPPORTED = {
    "prompt": "stored prompts are not supported",
    "moderation": "no moderation model is served here, so input and output cannot be scored or blocked",
}


def parse_create_request(body: Any) -> CreateResponseRequest:
    """Validate a request body, raising `InvalidRequest` with the first offending `param`."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    for key, why in _UNSUPPORTED.items():
        if body.get(key) is not None:
            raise InvalidRequest(f"'{key}' is not supported: {why}.", param=key, code="unsupported_parameter")
    check_known_fields(body, CreateResponseRequest.model_fields)
    _refuse_unsupported_tools(body.get("tools"))
    _refuse_unsupported_items(body.get("input"))
    try:
        req = CreateResponseRequest.model_validate(body)
    except ValidationError as exc:
        raise invalid_request(exc) from None
    if isinstance(req.input, list):
        _check_roles(req.input)
        _check_trigger_last(req.input)
    check_includes(req.include)
    _check_combinations(req)
    _check_tools(req)
    _check_skills(req)
    _check_tool_choice(req)
    fmt = req.text.format if req.text else None
    if fmt is not None and fmt.type == "json_schema" and (fmt.schema_ is None or not fmt.name):
        raise InvalidRequest("text.format json_schema needs 'name' and 'schema'.", param="text.format")
    return req


def _refuse_unsupported_tools(tools: Any) -> None:
    """Tool types this server does not offer: a 400 `unsupported_value` naming `tools[i].type`, before
    validation."""
    for i, tool in enumerate(tools if isinstance(tools, list) else []):  # (not a list: validation says so)
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in TOOL_TYPES:
            raise InvalidRequest(
                f"Tool type {kind!r} is not supported; supported: {', '.join(map(repr, TOOL_TYPES))}.",
                param=f"tools[{i}].type",
                code="unsupported_value",
            )


def _check_combinations(req: CreateResponseRequest) -> None:
    """Parameters refused together."""
    if req.conversation is not None and req.previous_response_id:
        raise InvalidRequest(
            "Mutually exclusive parameters: give either 'previous_response_id' or 'conversation', not both.",
            param="conversation",
            code="mutually_exclusive_parameters",
        )
    if req.background and not req.store:
        raise InvalidRequest("background responses must be stored (store: true).", param="background")
    window = req.background_options.completion_window if req.background_options else None
    if window in ("2h", "8h") and (not req.background or req.stream):
        raise InvalidRequest(
            f"background_options.completion_window {window!r} needs background: true and no streaming.",
            param="background_options.completion_window",
        )


def _check_tools(req: CreateResponseRequest) -> None:
    """Unique function and custom tool names, at most one code_interpreter and one file_search (and no client
    tool named as the file search is offered)."""
    names = [model_tool_name(t.name, ns) for ns, t in req.client_tools] + req.coding_tools
    if len(set(names)) != len(names):
        raise InvalidRequest(
            "Function and custom tool names must be unique, and differ from the coding tools given (shell, "
            "local_shell, apply_patch); a namespaced tool counts as namespace__name.",
            param="tools",
        )
    for i, tool in enumerate(req.tools):
        if isinstance(tool, WebSearchTool):
            search_options(tool, f"tools[{i}]")  # its filters and user_location as the SDK types them
    if any(isinstance(t, FileSearchTool) for t in req.tools):
        if sum(isinstance(t, FileSearchTool) for t in req.tools) > 1:
            raise InvalidRequest("At most one file_search tool may be given.", param="tools")
        if "file_search" in names:  # the name the file search is offered to the model under
            raise InvalidRequest(
                "A function or custom tool named 'file_search' cannot be given beside the file_search tool.",
                param="tools",
            )
    if sum(isinstance(t, CodeInterpreterTool) for t in req.tools) > 1:
        raise InvalidRequest("At most one code_interpreter tool may be given.", param="tools")


def _check_skills(req: CreateResponseRequest) -> None:
    """Skills given to a code interpreter's container or a shell's environment: a 400 naming them, as `POST
    /v1/containers` answers (an empty list is none)."""
    for i, tool in enumerate(req.tools):
        if isinstance(tool, CodeInterpreterTool) and isinstance(tool.container, ContainerAuto):
            skills, param = (tool.container.model_extra or {}).get("skills"), f"tools[{i}].container.skills"
        elif isinstance(tool, ShellTool) and tool.environment is not None:
            skills, param = tool.environment.skills, f"tools[{i}].environment.skills"
        else:
            continue
        if skills:
            raise InvalidRequest(SKILLS_REFUSED, param=param, code="unsupported_parameter")


def _check_tool_choice(req: CreateResponseRequest) -> None:
    """`tool_choice` names only tools the request gives, and `required` needs one."""
    names, customs = req.tool_names("function"), req.tool_names("custom")
    choice = req.tool_choice
    if isinstance(choice, ToolChoiceFunction) and choice.name not in names:
        raise InvalidRequest(
            f"tool_choice names function {choice.name!r}, which is not in tools.", param="tool_choice"
        )
    if isinstance(choice, ToolChoiceCustom) and choice.name not in customs:
        raise InvalidRequest(
            f"tool_choice names custom tool {choice.name!r}, which is not in tools.", param="tool_choice"
        )
    if isinstance(choice, ToolChoiceCoding) and choice.type not in req.coding_tools:
        raise InvalidRequest(
            f"tool_choice asks for {choice.type}, which is not in tools.", param="tool_choice"
        )
    searches = any(isinstance(t, WebSearchTool) for t in req.tools)
    file_search = any(isinstance(t, FileSearchTool) for t in req.tools)
    if isinstance(choice, ToolChoiceFileSearch) and not file_search:
        raise InvalidRequest("tool_choice asks for file_search, which is not in tools.", param="tool_choice")
    if isinstance(choice, ToolChoiceWebSearch) and not searches:
        raise InvalidRequest(
            f"tool_choice asks for {choice.type}, which is not in tools.", param="tool_choice"
        )
    if isinstance(choice, ToolChoiceBuiltin) and req.code_tool is None:
        raise InvalidRequest(
            "tool_choice asks for code_interpreter, which is not in tools.", param="tool_choice"
        )
    if isinstance(choice, ToolChoiceAllowed):
        labels = {t.server_label for t in req.mcp_tools}
        check_allowed_tools(
            choice,
            set(names),
            req.code_tool is not None,
            set(customs),
            labels,
            set(req.coding_tools),
            has_web_search=searches,
            has_file_search=file_search,
        )
    if choice == "required" and not req.tools:
        raise InvalidRequest("tool_choice 'required' needs at least one tool.", param="tool_choice")


_UNSUPPORTED_PARTS = ("input_audio",)  # input_file: read as text (tools/file_inputs.py)


def _implied_type(item: Any) -> Any:
    """An input item given without its `type` (or with `type: null`), with the one the SDK implies:
    `{"role": ..., "content": ...}` is a message (`EasyInputMessage`), `{"id": ...}` alone an item reference
    (`ItemReferenceParam`, whose `type` is optional)."""
    if not isinstance(item, dict) or item.get("type") is not None:
        return item
    if "role" in item:
        return {**item, "type": "message"}
    if "id" in item and set(item) <= {"id", "type"}:
        return {**item, "type": "item_reference"}
    return item


def _refuse_unsupported_items(items: Any) -> None:
    """Input item and content types this server knows but does not handle: a 400 `unsupported_value` before
    validation (which would only say they are not among the supported ones)."""
    if not isinstance(items, list):
        return
    for i, item in enumerate(map(_implied_type, items)):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind not in INPUT_ITEM_TYPES:
            raise InvalidRequest(
                f"Input item type {kind!r} is not supported; supported: {', '.join(INPUT_ITEM_TYPES)}.",
                param=f"input[{i}].type",
                code="unsupported_value",
            )
        assert isinstance(item, dict)
        field = "output" if kind in ("function_call_output", "custom_tool_call_output") else "content"
        parts = item.get(field)
        for j, part in enumerate(parts if isinstance(parts, list) else []):
            if isinstance(part, dict) and part.get("type") in _UNSUPPORTED_PARTS:
                raise InvalidRequest(
                    f"Content type {part['type']!r} is not supported: audio input is not served.",
                    param=f"input[{i}].{field}[{j}].type",
                    code="unsupported_value",
                )


def _check_trigger_last(items: list[InputItem]) -> None:
    """A `compaction_trigger` must be the input's last item, as the SDK says."""
    for i, item in enumerate(items[:-1]):
        if isinstance(item, CompactionTriggerInput):
            raise InvalidRequest(
                "A compaction_trigger must be the final input item.",
                param=f"input[{i}]",
                code="invalid_value",
            )


def _check_roles(items: list[InputItem]) -> None:
    """A message's content parts must be of its role's kind, as OpenAI requires: `input_text` from the user,
    system or developer, `output_text` or `refusal` from the assistant."""
    for i, item in enumerate(items):
        if not isinstance(item, MessageInput) or isinstance(item.content, str):
            continue
        allowed = ASSISTANT_PART_TYPES if item.role == "assistant" else USER_PART_TYPES
        for j, part in enumerate(item.content):
            if part.type not in allowed:
                raise InvalidRequest(
                    f"Invalid value: {part.type!r}. Supported values are: {', '.join(map(repr, allowed))} "
                    f"(the content of a message with role {item.role!r}).",
                    param=f"input[{i}].content[{j}].type",
                    code="invalid_value",
                )

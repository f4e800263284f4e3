"""A create request's preparation: the request read, checked and resolved into the plan its response runs.

`ResponsesService.create` calls the two stages in turn:

- `Planner.resolve` reads and checks, calling no model, before the response takes an admission slot: the
  model named, the items the response continues (a previous response's or a conversation's), the input
  with its files read and its references to stored items resolved, the tools offered, and the turns the
  model sees (with `truncation: "auto"`, the oldest dropped until they fit the context window).
- `Planner.plan` makes the `ResponsePlan`: the context compacted (`context_management`: a model call, so
  the caller holds an admission slot first), the code interpreter's container, the sampling, the MCP
  servers, and the response's echo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from vllm_responses.agent.loop import AgentPlan
from vllm_responses.config import Config
from vllm_responses.context.compaction import Compaction, compact, over_threshold
from vllm_responses.context.file_results import FILE_SEARCH_NAME
from vllm_responses.context.images import ImageLimits, check_input_images_off_loop
from vllm_responses.context.reasoning import Opener, check_sealed_reasoning
from vllm_responses.context.references import check_call_outputs, resolve_stored_items
from vllm_responses.context.truncation import fit_context
from vllm_responses.context.turns import input_to_items, items_to_turns
from vllm_responses.engine.base import Engine
from vllm_responses.engine.types import (
    CODE_TOOL_NAME,
    ForcedTool,
    GenerateRequest,
    Message,
    Sampling,
    ToolChoice,
    ToolSpec,
    Turn,
    Usage,
)
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.inputs import model_tool_name
from vllm_responses.protocol.items import ResponseEcho
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.protocol.status import UNFINISHED
from vllm_responses.protocol.tool_choice import (
    ToolChoiceAllowed,
    ToolChoiceBuiltin,
    ToolChoiceCoding,
    ToolChoiceCustom,
    ToolChoiceFileSearch,
    ToolChoiceFunction,
    ToolChoiceMcp,
    ToolChoiceWebSearch,
)
from vllm_responses.retrieval.search import VectorSearch
from vllm_responses.runs.run import Run
from vllm_responses.service.configuration import configured
from vllm_responses.service.conversations import ConversationService
from vllm_responses.service.echo import max_output_tokens, response_echo
from vllm_responses.store.base import DEFAULT_PROJECT, ResponseStore, StoredResponse
from vllm_responses.store.sealing import ReasoningSeal
from vllm_responses.tools.code_interpreter import check_code_tool, code_container
from vllm_responses.tools.containers import ContainerService
from vllm_responses.tools.file_inputs import FileInputs
from vllm_responses.tools.file_search import FileSearchPlan, file_search_plan, file_search_spec
from vllm_responses.tools.functions import custom_tools, offered_tools
from vllm_responses.tools.grammars import GrammarChecker
from vllm_responses.tools.mcp import UrlPolicy, check_mcp_request, mcp_plan
from vllm_responses.tools.tool_search import ToolSearch, loaded_tools, tool_search_of
from vllm_responses.tools.web_search import SEARCH_TOOL_NAME, SearchPlan, search_plan, search_specs

__all__ = ["Planner", "Resolved", "ResponsePlan", "engine_tool_choice", "request_sampling"]


@dataclass(frozen=True)
class Resolved:
    """A create request read and checked (`Planner.resolve`)."""

    history: list[dict[str, Any]]  # the stored items it continues: a previous response's or a conversation's
    input_items: list[dict[str, Any]]  # its input as items, references to stored items resolved
    turns: list[Turn]  # what the model sees: the instructions, then the items (fitted: `truncation`)
    tools: list[ToolSpec]  # the tools offered (an MCP server's come once the loop lists them)
    search: SearchPlan | None  # where its web searches go (None: the tool is not offered)
    tool_search: ToolSearch | None  # its deferred tools and their search (None: no `tool_search` tool)
    # the request as it runs: with the settings of the context's `configuration_update` items
    request: CreateResponseRequest
    triggered: bool = False  # its input ended with a `compaction_trigger`: the context is compacted first
    file_search: FileSearchPlan | None = None  # its file searches (None: no `file_search` tool offered)

    @property
    def items(self) -> list[dict[str, Any]]:
        """The model's context as items: the history, then the input."""
        return [*self.history, *self.input_items]


@dataclass(frozen=True)
class ResponsePlan:
    """What a response is started with (`Planner.plan`)."""

    agent: AgentPlan  # what its agent loop runs
    echo: ResponseEcho  # the settings in effect, as the response reports them
    context: list[dict[str, Any]]  # the items it continues from (compacted, when it was): kept in its history
    input_items: list[dict[str, Any]]


class Planner:
    """Turns create requests into plans. `runs` is the service's table of live runs (a previous response
    still running there is refused); `store` and `conversations` hold the items a request continues;
    `seal` opens the reasoning items' `encrypted_content`, each for the project of its request
    (store/sealing.py); `vector_search`, set once the vector stores are open, runs the `file_search` tool
    (None: a request with the tool is answered 503)."""

    def __init__(
        self,
        config: Config,
        engine: Engine,
        store: ResponseStore,
        conversations: ConversationService,
        containers: ContainerService,
        runs: Mapping[str, Run],
        files: FileInputs,
        seal: ReasoningSeal | None = None,
    ) -> None:
        self.config = config
        self.seal = seal
        self.engine = engine
        self.store = store
        self.conversations = conversations
        self.containers = containers
        self.runs = runs
        self.image_limits = ImageLimits(config.max_image_bytes, config.max_image_pixels)
        self.grammars = GrammarChecker(config.max_grammar_bytes, config.grammar_compile_timeout)
        self.files = files
        self.vector_search: VectorSearch | None = None

    @property
    def _mcp_policy(self) -> UrlPolicy:
        """The operator's rule for the MCP server URLs requests name."""
        return UrlPolicy(self.config.mcp_allowed_urls, self.config.mcp_allow_private_networks)

    @property
    def model_names(self) -> tuple[str, ...]:
        """The names a request may give as `model` (the first is echoed back)."""
        return self.config.served_model_names or (self.engine.model_name,)

    async def resolve(
        self, req: CreateResponseRequest, local: ResponseStore | None = None, project: str = DEFAULT_PROJECT
    ) -> Resolved:
        """The request read and checked, with no model call (`local`: see `ResponsesService.create`); what it
        continues or references must be `project`'s (another project's is not found)."""
        self._check_model(req)
        given = input_to_items(req.input)
        budget = self.files.check(given, "input")  # counts, the model, inline bytes: before any I/O
        if isinstance(req.input, list):  # inline images decoded and checked, on their own threads
            await check_input_images_off_loop(req.input, self.image_limits)
        open_sealed = self.opener(project)
        if open_sealed is not None:
            check_sealed_reasoning(req.input, open_sealed)
        history = await self._history(req, local, project)
        read = await self.files.read(given, "input", project, budget)
        input_items = await resolve_stored_items(self.store, read, "input", project, open_sealed, local)
        req = configured(req, [*history, *input_items])
        triggered = bool(input_items) and input_items[-1].get("type") == "compaction_trigger"
        input_items = [item for item in input_items if item.get("type") != "compaction_trigger"]
        check_call_outputs(history, input_items)
        check_mcp_request(req, [*history, *input_items], input_items, self._mcp_policy)
        check_code_tool(req, self.containers.interpreter)
        turns = _turns(req, [*history, *input_items], open_sealed)
        loaded = loaded_tools([*history, *input_items])
        await self.grammars.check(custom_tools(req, loaded))  # off the event loop (then cached)
        tools = offered_tools(req, loaded)
        search = _offered_search(req, self.config)
        if search is not None:
            tools += search_specs()
        file_search = await _offered_file_search(req, self.vector_search, project)
        if file_search is not None:
            tools.append(file_search_spec())
        if (finder := await tool_search_of(req, self.config.max_deferred_tools)) is not None:
            tools.append(finder.spec)
        if req.truncation == "auto":
            turns = await self._fitted(req, turns, tools)
        return Resolved(history, input_items, turns, tools, search, finder, req, triggered, file_search)

    async def plan(
        self,
        req: CreateResponseRequest,
        resolved: Resolved,
        project: str = DEFAULT_PROJECT,
        *,
        compact: bool = False,
    ) -> ResponsePlan:
        """The response's plan: its context compacted when `compact` (`compaction_due` said so: a model call),
        its code interpreter's container (`project`'s) checked now and chosen on first use, its sampling and
        echo."""
        context, turns = resolved.items, resolved.turns
        compacted = await self._compacted(req, resolved) if compact else None
        if compacted is not None:
            context, turns = compacted.items, _turns(req, compacted.items, self.opener(project))
        container = (
            await code_container(req, self.containers, resolved.items, project) if req.code_tool else None
        )
        echo = response_echo(req, self.model_names[0], self.engine.default_sampling)
        agent = AgentPlan(
            turns=tuple(turns),
            tools=tuple(resolved.tools),
            tool_choice=engine_tool_choice(req),
            parallel_tool_calls=req.parallel_tool_calls,
            sampling=request_sampling(req),
            max_output_tokens=max_output_tokens(req, self.engine.default_sampling),
            max_tool_calls=req.max_tool_calls,
            max_turns=self.config.max_turns,
            code_timeout_s=self.config.code_interpreter_timeout,
            concise_summary_over=self.config.concise_summary_over,
            container=container,
            structured=_structured(req),
            compaction=compacted.item if compacted is not None else None,
            compaction_usage=compacted.usage if compacted is not None else Usage(),
            mcp=mcp_plan(req, resolved.items, self.config.mcp_timeout, self._mcp_policy),
            search=resolved.search,
            file_search=resolved.file_search,
            tool_search=resolved.tool_search,
            truncate=req.truncation == "auto",
            context_management=req.context_management[0] if req.context_management else None,
            reasoning_effort=_effort(req),
            verbosity=_verbosity(req),
        )
        return ResponsePlan(agent, echo, context, resolved.input_items)

    def first_call(
        self, req: CreateResponseRequest, turns: list[Turn], tools: list[ToolSpec]
    ) -> GenerateRequest:
        """The response's first model call as far as its prompt goes (what `Engine.count_tokens` renders)."""
        choice = engine_tool_choice(req)
        offered = bool(tools) and choice != "none" and self.config.max_turns > 1
        return GenerateRequest(
            request_id="input-tokens",
            turns=tuple(turns),
            tools=tuple(tools) if offered else (),
            tool_choice=choice if offered else "none",
            parallel_tool_calls=req.parallel_tool_calls,
            reasoning_effort=_effort(req),
            verbosity=_verbosity(req),
        )

    def opener(self, project: str) -> Opener | None:
        """What opens the sealed reasoning `project`'s requests send (a blob sealed for another does not)."""
        return None if self.seal is None else partial(self.seal.open, project=project)

    def _check_model(self, req: CreateResponseRequest) -> None:
        """The model must be one this server serves: a 404 naming `model` otherwise."""
        if req.model not in self.model_names:
            raise NotFound(
                f"The model {req.model!r} does not exist; this server serves {', '.join(self.model_names)}.",
                param="model",
                code="model_not_found",
            )

    async def _history(
        self, req: CreateResponseRequest, local: ResponseStore | None, project: str
    ) -> list[dict[str, Any]]:
        """The stored items the request continues: its previous response's history, or its conversation's."""
        if req.previous_response_id:
            return (await self._previous(req.previous_response_id, local, project)).history
        if req.conversation:
            return await self.conversations.history(req.conversation, project)
        return []

    async def _previous(self, response_id: str, local: ResponseStore | None, project: str) -> StoredResponse:
        """The previous response of `project`, finished: looked up in `local` first, then in the store."""
        live = self.runs.get(response_id)
        if live is not None and live.project == project and not live.done.is_set():
            raise InvalidRequest(
                f"Previous response {response_id!r} is still in progress.", param="previous_response_id"
            )
        prev = await local.get(response_id) if local is not None else None
        if prev is None:
            prev = await self.store.get(response_id)
        if prev is None or prev.project != project:
            raise NotFound(
                f"Previous response with id {response_id!r} not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        if prev.response.get("status") in UNFINISHED:  # running on another replica
            raise InvalidRequest(
                f"Previous response {response_id!r} is still in progress.", param="previous_response_id"
            )
        return prev

    async def _fitted(
        self, req: CreateResponseRequest, turns: list[Turn], tools: list[ToolSpec]
    ) -> list[Turn]:
        """`truncation: "auto"`: the oldest turns dropped until the first model call fits the context window."""
        first = self.first_call(req, turns, tools)
        budget = max_output_tokens(req, self.engine.default_sampling)
        return list(await fit_context(self.engine, first, budget))

    async def compaction_due(self, req: CreateResponseRequest, resolved: Resolved) -> bool:
        """Whether `plan` will compact the context (`context_management` and its threshold passed, or a
        `compaction_trigger`): a model call before the response begins, made once the response holds a running
        slot."""
        if resolved.triggered:
            return True
        if not req.context_management:
            return False
        first = self.first_call(req, resolved.turns, resolved.tools)
        return await over_threshold(self.engine, req.context_management[0], first)

    async def _compacted(self, req: CreateResponseRequest, resolved: Resolved) -> Compaction | None:
        """The context compacted (context/compaction.py), as `compaction_due` asked; None when nothing came of
        it."""
        entry = req.context_management[0] if req.context_management else None
        structured = entry.structured_outputs if entry is not None else None
        done = await compact(self.engine, resolved.items, structured=structured)
        return done if done.item is not None else None


def _offered_search(req: CreateResponseRequest, config: Config) -> SearchPlan | None:
    """The response's search plan where the web search is offered (an `allowed_tools` choice may leave it out);
    a `tool_choice` forcing a search the server cannot make is a 400 naming `tool_choice`."""
    url = config.web_search_url
    search = search_plan(req, url, config.web_search_timeout, config.web_search_page_allow_private_networks)
    choice = req.tool_choice
    if search is None and isinstance(choice, ToolChoiceWebSearch):
        why = "no search backend is configured" if url is None else "the tool asks for no live web access"
        raise InvalidRequest(
            f"tool_choice asks for {choice.type}, which is not served: {why}.", param="tool_choice"
        )
    if isinstance(choice, ToolChoiceAllowed) and not choice.allows_web_search():
        return None
    return search


async def _offered_file_search(
    req: CreateResponseRequest, searcher: VectorSearch | None, project: str
) -> FileSearchPlan | None:
    """The response's file search plan, checked, where the tool is offered (an `allowed_tools` choice may
    leave it out)."""
    plan = await file_search_plan(req, searcher, project)
    choice = req.tool_choice
    if isinstance(choice, ToolChoiceAllowed) and not choice.allows("file_search"):
        return None
    return plan


def _turns(req: CreateResponseRequest, items: list[dict[str, Any]], open_sealed: Opener | None) -> list[Turn]:
    """The turns the model sees: the instructions, then the items."""
    turns = items_to_turns(items, open_sealed=open_sealed)
    if req.instructions:
        turns.insert(0, Message("system", req.instructions))
    return turns


def _effort(req: CreateResponseRequest) -> str | None:
    """`reasoning.effort`, when the request sets it."""
    return req.reasoning.effort if req.reasoning else None


def _verbosity(req: CreateResponseRequest) -> str | None:
    """`text.verbosity`, when the request sets it."""
    return req.text.verbosity if req.text else None


def _structured(req: CreateResponseRequest) -> tuple[dict[str, Any], ...]:
    """The vendor extension `structured_outputs`: one constraint per model call (the last one repeats)."""
    structured = req.structured_outputs
    return (structured,) if isinstance(structured, dict) else tuple(structured or ())


def _text_format(req: CreateResponseRequest) -> dict[str, Any] | None:
    """`text.format` as the engine takes it; None for plain text."""
    fmt = req.text.format if req.text and req.text.format else None
    if fmt is None or fmt.type == "text":
        return None
    return fmt.model_dump(mode="json", by_alias=True, exclude_none=True)


def request_sampling(req: CreateResponseRequest) -> Sampling:
    """The sampling every model call of the response starts from (the loop sets budget and constraints)."""
    stop = [req.stop] if isinstance(req.stop, str) else req.stop or []
    return Sampling(
        temperature=req.temperature,
        top_p=req.top_p,
        text_format=_text_format(req),
        seed=req.seed,
        top_k=req.top_k,
        min_p=req.min_p,
        presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty,
        repetition_penalty=req.repetition_penalty,
        stop=tuple(stop),
        stop_token_ids=tuple(req.stop_token_ids or ()),
        ignore_eos=req.ignore_eos,
        min_tokens=req.min_tokens,
        logit_bias=req.logit_bias,
        include_stop_str_in_output=req.include_stop_str_in_output,
        skip_special_tokens=req.skip_special_tokens,
        # As OpenAI: the include turns logprobs on; `top_logprobs` alone only sets how many alternatives.
        logprobs=(req.top_logprobs or 0) if "message.output_text.logprobs" in req.include else None,
    )


def engine_tool_choice(req: CreateResponseRequest) -> ToolChoice:
    """A create body's `tool_choice` as the engine takes it (a named tool forced, a namespaced one as the model
    is offered it; `allowed_tools`: its mode, the tools offered being restricted by the service; an MCP
    choice: `auto`, the agent loop forces it once the server's tools are listed)."""
    choice = req.tool_choice
    if isinstance(choice, (ToolChoiceFunction, ToolChoiceCustom)):
        top_level = {t.name for ns, t in req.client_tools if ns is None}
        namespace, dot, name = choice.name.partition(".")
        return ForcedTool(
            choice.name if choice.name in top_level or not dot else model_tool_name(name, namespace)
        )
    if isinstance(choice, ToolChoiceBuiltin):
        return ForcedTool(CODE_TOOL_NAME)
    if isinstance(choice, ToolChoiceWebSearch):
        return ForcedTool(SEARCH_TOOL_NAME)
    if isinstance(choice, ToolChoiceFileSearch):
        return ForcedTool(FILE_SEARCH_NAME)
    if isinstance(choice, ToolChoiceCoding):
        return ForcedTool(choice.type)  # offered under its type (tools/shell_patch.py)
    if isinstance(choice, ToolChoiceAllowed):
        return choice.mode
    if isinstance(choice, ToolChoiceMcp):
        return "auto"
    return choice

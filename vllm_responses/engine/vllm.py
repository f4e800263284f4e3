"""`VLLMEngine`: the `Engine` interface over vLLM's `AsyncLLM` (vLLM is imported only in `engine/`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

from vllm import SamplingParams
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.exceptions import VLLMClientError
from vllm.inputs import TokensPrompt
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.exceptions import EngineDeadError

from vllm_responses.engine.base import EngineError, EngineRejected, EngineUnavailable
from vllm_responses.engine.call_shapes import call_shape
from vllm_responses.engine.call_tally import CallTally, Prepared
from vllm_responses.engine.checked_grammars import CheckedGrammars
from vllm_responses.engine.logprobs import TokenAligner
from vllm_responses.engine.parser_names import (
    THINK_REASONING_PARSERS,
    load_parser,
    parser_factory,
    reasoning_parser_route,
    tool_parser_route,
)
from vllm_responses.engine.parsers.base import PlainTextParser, ToolParser
from vllm_responses.engine.parsers.reasoning import ReasoningSplitter
from vllm_responses.engine.prompt import (
    ANSWER_BAD_WORDS,
    ANSWER_STOP,
    CODE_PREFILL,
    CODE_STOP,
    TemplateCaps,
    choose_parser,
    code_ran_since_user,
    probe_template,
    render_prompt,
    should_prefill_code,
)
from vllm_responses.engine.recent_ids import RecentIds
from vllm_responses.engine.sampling import (
    GENERATION_DEFAULTS,
    MARKDOWN_FORMATS,
    answer_beside_tools,
    forced_tools,
    structured_constraint,
    to_sampling_params,
    with_format_tokens,
)
from vllm_responses.engine.sized_work import run_sized
from vllm_responses.engine.types import (
    EngineEvent,
    Finish,
    FinishReason,
    GenerateRequest,
    ToolSpec,
    Usage,
)
from vllm_responses.engine.vision import expanded_length, tokens_prompt

__all__ = ["VLLMEngine"]

_log = logging.getLogger(__name__)


class VLLMEngine:
    """An `Engine` over one `AsyncLLM`. Build it with `await VLLMEngine.start(args)` (or use it as an
    async context manager, which always shuts vLLM down).

    Options:
    - `chat_template`: a Jinja chat template used instead of the tokenizer's own.
    - `tool_parser`: parser name; None picks one from the chat template (see `parsers.select.pick_parser`).
    - Templates that mention `<think>` get the parser wrapped in `ReasoningSplitter` (reasoning text
      becomes `ReasoningDelta`s; output starts inside the block when the prompt ends with `<think>`).
    - `prefill_code` (default on): for markdown-format parsers, prefill the assistant turn with
      "```python\\n" (and stop at "```") on the first model call after a user message when the code
      interpreter is offered, and once more when that code did not parse. Forcing the code tool through
      `tool_choice` always prefills.
    """

    def __init__(
        self,
        llm: AsyncLLM,
        model_name: str,
        *,
        tool_parser: str | None = None,
        prefill_code: bool = True,
        chat_template: str | None = None,
        reasoning_parser: str | None = None,
    ) -> None:
        if reasoning_parser:
            reasoning_parser_route(reasoning_parser)  # an unknown name is refused before anything else
        self._llm = llm
        self._model_name = model_name
        self._tokenizer = llm.get_tokenizer()
        self._max_model_len = int(llm.model_config.max_model_len)
        # The model's generation config (`--generation-config`, `--override-generation-config` applied), as
        # vLLM's own server applies it to requests that leave a sampling field unset.
        diff = llm.model_config.get_diff_sampling_param()
        # `max_tokens` (the config's `max_new_tokens`) is the default budget of a whole response here.
        self._default_sampling = {k: v for k, v in diff.items() if k in (*GENERATION_DEFAULTS, "max_tokens")}
        self.chat_template = chat_template
        self.caps: TemplateCaps = probe_template(self._tokenizer, chat_template)
        self._images = bool(getattr(llm.model_config, "is_multimodal_model", False))
        self._recent_ids = RecentIds(self._tokenize)  # a response's prechecks and first call: one tokenizing
        self._checked = CheckedGrammars()  # a constraint's grammar converted once, not per precheck
        template = chat_template or getattr(self._tokenizer, "chat_template", None)
        template = template if isinstance(template, str) else None
        self.parser_name = choose_parser(tool_parser, template, model_name)
        self._parser_cls = parser_factory(self.parser_name, reasoning_parser, self._tokenizer, model_name)
        self._renderer = self._parser_cls()  # renders earlier calls and results into prompts
        # vLLM-only formats have no grammar of ours: a forced call is written and read as a Hermes call.
        self._forced_as_hermes = (
            tool_parser_route(self.parser_name) == "vllm"
            and call_shape(self.parser_name, forced=True) is None
        )
        # Our <think> splitter, unless vLLM's reasoning parser (inside the adapter) reads the reasoning.
        vllm_reasoning = bool(reasoning_parser) and reasoning_parser_route(reasoning_parser or "") == "vllm"
        self.reasoning = not vllm_reasoning and (
            (isinstance(template, str) and "<think>" in template)
            or reasoning_parser in THINK_REASONING_PARSERS
        )
        self.prefill_code = prefill_code
        self._closed = False

    @classmethod
    async def start(
        cls,
        args: AsyncEngineArgs,
        *,
        model_name: str | None = None,
        tool_parser: str | None = None,
    ) -> VLLMEngine:
        """Start vLLM and wrap it; shuts vLLM down on failure.

        The build (model load, engine-core process start: seconds) runs in a worker thread, so the
        event loop keeps serving other start-up work (e.g. warming sandbox workers) meanwhile.

        vLLM's engine metrics come with it: unless `--disable-log-stats`, `AsyncLLM` (its
        `StatLoggerManager`) registers a `PrometheusStatLogger` on prometheus_client's default registry, as
        under `vllm serve` with one API server; `/metrics` renders that registry (`observe/metrics.py`).
        """
        try:
            llm = await asyncio.to_thread(AsyncLLM.from_engine_args, args)
        except Exception as exc:
            raise EngineError(f"could not start vLLM for {args.model!r}: {exc}", code="engine_start") from exc
        try:
            # Built off the loop, vLLM starts its output handler lazily; start it now, on this loop, so
            # that engine failures are seen before the first request.
            start_handler = getattr(llm, "_run_output_handler", None)
            if start_handler is not None:
                start_handler()
            return cls(
                llm,
                model_name or str(args.model),
                tool_parser=tool_parser,
                reasoning_parser=getattr(args, "reasoning_parser", None) or None,
            )
        except BaseException:
            llm.shutdown()
            raise

    async def __aenter__(self) -> VLLMEngine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def llm(self) -> AsyncLLM:
        return self._llm

    @property
    def takes_images(self) -> bool:
        """Whether the served model is multimodal (vLLM's model config says so): it reads images."""
        return self._images

    @property
    def max_model_len(self) -> int:
        return self._max_model_len

    @property
    def default_sampling(self) -> Mapping[str, Any]:
        return dict(self._default_sampling)

    def _encode(self, text: str) -> list[int]:
        return self._recent_ids.ids(text)

    def _tokenize(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def render(self, request: GenerateRequest, prefill: str = "", forced: Sequence[ToolSpec] = ()) -> str:
        """The prompt text for `request` (`forced`: the tools of a forced call written as Hermes, described to a
        template without a tools section); a template that refuses the turns is an `EngineRejected` (a 400)."""
        try:
            return render_prompt(
                self._tokenizer,
                request,
                self.caps,
                self._renderer,
                prefill,
                self.chat_template,
                forced,
                images=self._images,
            )
        except Exception as exc:  # jinja's TemplateError and whatever a template raises
            raise EngineRejected(
                f"the chat template of {self._model_name} cannot render this conversation: {exc}",
                code="invalid_prompt",
            ) from exc

    def _call_format(self, request: GenerateRequest) -> str:
        """The format this model call's output is written (and parsed) in: the parser's, except a forced call
        that the model's own format cannot write, which is written under a grammar as a Hermes call (as vLLM's
        own server forces calls in a JSON shape of its own rather than the model's format): under a vLLM-only
        parser name (no grammar of ours), and under a markdown format (the embedded default model's: it
        writes code cells only) when a forced tool is not the code interpreter. Under a vLLM-only parser name,
        a call that may call tools or answer in JSON (`answer_beside_tools`) is written as Hermes calls too."""
        forced = forced_tools(request)
        if self._forced_as_hermes and (forced or answer_beside_tools(request)):
            return "hermes"
        if self.parser_name in MARKDOWN_FORMATS and any(not t.code_interpreter for t in forced):
            return "hermes"
        return self.parser_name

    def _prepare(self, request: GenerateRequest) -> Prepared:
        """One call's prompt text (prefill included), its prefill, stop strings, banned words and parser."""
        self._check_effort(request)
        tools = request.tools if request.tool_choice != "none" else ()
        call_format = self._call_format(request)
        own = call_format == self.parser_name
        parser: ToolParser = self._parser_cls(tools) if own else load_parser(call_format)(tools)
        keep_special = bool(getattr(parser, "keep_special_tokens", False))
        prefill = ""
        stop: list[str] = []
        bad_words: list[str] = []
        markdown = self.parser_name in MARKDOWN_FORMATS and own  # (a forced Hermes call has no code prefill)
        if should_prefill_code(request, markdown_format=markdown, policy=self.prefill_code):
            prefill, stop = CODE_PREFILL, [CODE_STOP]
        elif markdown and self.prefill_code and code_ran_since_user(request):
            # With the prefill policy a markdown-format model gets one code call per user message (and a
            # retry when it did not parse): once its code has run, it answers in plain text (weak models
            # otherwise re-run the same cell, or echo it, until the token budget is gone). An answer held to
            # `text.format` ends with its JSON, not at a blank line (JSON may hold one).
            parser = PlainTextParser(())
            stop = [] if answer_beside_tools(request) else [ANSWER_STOP]
            bad_words = list(ANSWER_BAD_WORDS)
        prompt = self.render(request, prefill, forced=forced_tools(request) if not own else ())
        if self.reasoning:
            parser = ReasoningSplitter(parser, in_reasoning=prompt.rstrip().endswith("<think>"))
        return Prepared(prompt, prefill, stop, bad_words, parser, call_format, keep_special)

    def _check_effort(self, request: GenerateRequest) -> None:
        """`reasoning.effort` needs a template that takes it (a variable `probe_template` found); "none" asks
        for no reasoning, which a model without one does not do anyway."""
        effort = request.reasoning_effort
        if effort is not None and effort != "none" and self.caps.effort is None:
            raise EngineRejected(
                f"Unsupported parameter: 'reasoning.effort' is not supported with this model: the chat "
                f"template of {self._model_name} has no reasoning control.",
                code="unsupported_parameter",
                param="reasoning.effort",
            )

    async def count_tokens(self, request: GenerateRequest) -> int:
        """The prompt's tokens; a long one (as `precheck`) counted in a worker thread, off the event loop."""
        return await run_sized(self._count, request)

    def _count(self, request: GenerateRequest) -> int:
        prompt = self._prompt(request, self._encode(self._prepare(request).prompt))
        return self._prompt_length(prompt)

    def _prompt(self, request: GenerateRequest, prompt_ids: list[int]) -> TokensPrompt:
        return tokens_prompt(request.turns, prompt_ids, takes_images=self._images)

    def _prompt_length(self, prompt: TokensPrompt) -> int:
        return expanded_length(self._llm, prompt)

    def _call(self, request: GenerateRequest) -> tuple[TokensPrompt, str, ToolParser, SamplingParams]:
        """One call as vLLM gets it: the prompt, prefill, output parser, sampling parameters; refused
        (`EngineRejected`) when the prompt leaves no room in the context or a sampling value is out of range."""
        prepared = self._prepare(request)
        prompt_ids = self._encode(prepared.prompt)
        prompt = self._prompt(request, prompt_ids)
        length = self._prompt_length(prompt)
        room = self._max_model_len - length
        if room < 1:  # vLLM refuses a prompt as long as the context: nothing could be generated
            raise EngineRejected(
                f"This model's maximum context length is {self._max_model_len} tokens, but the input is "
                f"{length} tokens as the model sees it (instructions, tools and chat template "
                "included), which leaves no room for output; shorten the input or set truncation to 'auto'.",
                code="context_length_exceeded",
            )
        wanted = request.sampling.max_tokens
        params = to_sampling_params(
            with_format_tokens(request.sampling, self.parser_name),
            max_tokens=min(wanted, room) if wanted else room,
            structured=structured_constraint(request, prepared.call_format, prefilled=bool(prepared.prefill)),
            stop=prepared.stop,
            bad_words=prepared.bad_words,
            defaults=self._default_sampling,
        )
        if prepared.keep_special_tokens:
            params.skip_special_tokens = False
        see_prompt = getattr(prepared.parser, "see_prompt", None)
        if see_prompt is not None:
            see_prompt(prompt_ids)
        return prompt, prepared.prefill, prepared.parser, params

    # --- admission ---
    @property
    def max_num_seqs(self) -> int:
        config = self._llm.vllm_config
        return int(config.scheduler_config.max_num_seqs) * max(1, config.parallel_config.data_parallel_size)

    async def precheck(self, request: GenerateRequest) -> int:
        """`_call`, then the checks vLLM makes when the request is added (token ids in the vocabulary, a
        structured-output grammar its backend compiles): all that `generate` would refuse before any output.
        A short prompt is checked at once (well under 2 ms); a long one, whose tokenizing takes
        longer, in a worker thread so that the event loop keeps streaming meanwhile."""
        return await run_sized(self._precheck, request)

    def _precheck(self, request: GenerateRequest) -> int:
        prompt, _prefill, _parser, params = self._call(request)
        try:
            self._checked.verify(params, self._verify)
        except (VLLMClientError, ValueError) as exc:
            raise EngineRejected(f"vLLM rejected the request: {exc}", code="invalid_request") from exc
        return self._prompt_length(prompt)

    def _verify(self, params: SamplingParams) -> None:
        """vLLM's own checks of `params`, as `AsyncLLM.add_request` makes them."""
        config = self._llm.vllm_config
        params.verify(
            self._llm.model_config,
            config.speculative_config,
            config.structured_outputs_config,
            self._tokenizer,
        )

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        if self._closed:
            raise EngineUnavailable("the engine is shut down", code="engine_closed")
        prompt, prefill, parser, params = await run_sized(self._call, request)  # as `precheck`
        prompt_tokens = len(prompt["prompt_token_ids"])
        vllm_id = f"{request.request_id}-{uuid.uuid4().hex[:8]}"
        tally = CallTally(one_call=not request.parallel_tool_calls)
        wanted = request.sampling.logprobs
        aligner = TokenAligner(wanted) if wanted is not None else None
        output_tokens = 0
        cached = 0
        reason: str | None = None
        stream = self._llm.generate(prompt, params, vllm_id)
        try:
            if prefill:
                if aligner is not None:
                    aligner.prefill(prefill)
                for delta in tally.see(parser.feed(prefill)):
                    yield delta
            async for out in stream:
                completion = out.outputs[0]
                output_tokens += len(completion.token_ids)
                deltas = parser.feed_tokens(completion.text, completion.token_ids)
                if aligner is not None:
                    aligner.chunk(completion.text, completion.token_ids, completion.logprobs)
                    deltas = aligner.attach(deltas)
                for delta in tally.see(deltas):
                    yield delta
                expanded = getattr(out, "prompt_token_ids", None) if "multi_modal_data" in prompt else None
                if expanded:  # with images: the placeholders expanded by vLLM's processor
                    prompt_tokens = len(expanded)
                if out.finished or tally.cut:
                    reason = completion.finish_reason or "stop"
                    cached = int(out.num_cached_tokens or 0)
                if tally.cut and not out.finished:  # one call only: the rest is not generated
                    await self._abort(stream, vllm_id)
                    break
            if reason == "abort" or reason is None:
                raise EngineUnavailable("the engine aborted the request", code="engine_aborted")
            last = parser.finish()
            for delta in tally.see(aligner.attach(last) if aligner is not None else last):
                yield delta
            finish: FinishReason = "length" if reason == "length" else "tool_calls" if tally.calls else "stop"
            thought = len(self._tokenize("".join(tally.reasoning))) if tally.reasoning else 0
            yield Finish(finish, Usage(prompt_tokens, output_tokens, cached, min(thought, output_tokens)))
        except (asyncio.CancelledError, GeneratorExit, EngineError):
            raise
        except EngineDeadError as exc:
            raise EngineUnavailable("the vLLM engine died", code="engine_dead") from exc
        except (VLLMClientError, ValueError) as exc:  # vLLM's request validation errors
            raise EngineRejected(f"vLLM rejected the request: {exc}", code="invalid_request") from exc
        except Exception as exc:
            raise EngineError(f"vLLM failed: {exc}") from exc
        finally:
            if reason is None:  # closed, cancelled or failed before the end: free the engine's slot
                await self._abort(stream, vllm_id)

    async def _abort(self, stream: AsyncIterator[Any], vllm_id: str) -> None:
        try:
            await stream.aclose()  # type: ignore[attr-defined]
            await self._llm.abort(vllm_id)
        except Exception:  # a dead engine has nothing left to abort
            _log.debug("abort of %s failed", vllm_id, exc_info=True)

    @property
    def dead(self) -> str | None:
        # `errored`: the engine-core process died (vLLM's monitor thread saw it) or the output handler ended.
        if self._closed or not self._llm.errored:
            return None
        resources = getattr(getattr(self._llm, "engine_core", None), "resources", None)
        if getattr(resources, "engine_dead", False):
            return "the vLLM engine-core process exited"
        return "vLLM's output handler stopped"

    async def ping(self) -> None:
        reason = self.dead
        if reason is not None:
            raise EngineUnavailable(reason, code="engine_dead")
        try:
            await self._llm.is_sleeping()  # a utility call answered by the engine core
        except EngineDeadError as exc:
            raise EngineUnavailable("the vLLM engine died", code="engine_dead") from exc

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._llm.shutdown()

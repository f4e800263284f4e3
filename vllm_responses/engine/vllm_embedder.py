"""`VLLMEmbedder`: the `Embedder` interface over a second, pooling `AsyncLLM` in this process (the embed task)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from vllm import PoolingParams
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.inputs import TokensPrompt
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.exceptions import EngineDeadError

from vllm_responses.engine.args import apply_cpu_env_defaults
from vllm_responses.engine.base import EngineError, EngineRejected, EngineUnavailable
from vllm_responses.engine.embedder import Embedded, EmbedInput
from vllm_responses.executors import TOKENIZE, run_on

__all__ = ["VLLMEmbedder", "pooling_engine_args"]

# Inputs of more characters than this in all are tokenized in a worker thread, off the event loop.
INLINE_CHARS = 16_384
_PROBE = "dimensions probe"


def pooling_engine_args(model: str, *, dtype: str, cpu: bool) -> AsyncEngineArgs:
    """vLLM's arguments for an embedding model beside the chat engine: the pooling runner; on CPU eager (no
    torch.compile start-up); its stats not logged (the chat engine's own Prometheus metrics stay the only
    `vllm:*` ones: a second stat logger would replace them). On CPU the small KV-cache space is set as for the
    chat engine (without it vLLM reserves most of the machine's memory)."""
    if cpu:
        apply_cpu_env_defaults()
    return AsyncEngineArgs(
        model=model,
        runner="pooling",
        dtype=dtype,  # type: ignore[arg-type]  # vLLM's Literal of names; ours come from cpu_dtype or a flag
        enforce_eager=cpu,
        disable_log_stats=True,
    )


class VLLMEmbedder:
    """An `Embedder` over one pooling `AsyncLLM`; `await VLLMEmbedder.start(args, name)` builds it."""

    def __init__(self, llm: AsyncLLM, model_name: str) -> None:
        self._llm = llm
        self._model_name = model_name
        self._tokenizer: Any = llm.get_tokenizer()
        self._max_len = int(llm.model_config.max_model_len)
        self._vocab = int(llm.model_config.get_vocab_size())
        self._dimensions = int(llm.model_config.get_hidden_size())  # until `_probe` measures the vectors
        self._closed = False

    async def _probe(self) -> None:
        """The length of the model's vectors, from one embedded (a projection after pooling may change it)."""
        self._dimensions = len(await self._one(self._tokenize([_PROBE])[0]))

    @classmethod
    async def start(cls, args: AsyncEngineArgs, model_name: str) -> VLLMEmbedder:
        """Build the engine in a worker thread (the event loop keeps serving meanwhile); shut down on failure."""
        try:
            llm = await asyncio.to_thread(AsyncLLM.from_engine_args, args)
        except Exception as exc:
            raise EngineError(
                f"could not start the embedding model {args.model!r}: {exc}", code="engine_start"
            ) from exc
        try:
            start_handler = getattr(llm, "_run_output_handler", None)
            if start_handler is not None:
                start_handler()  # built off the loop: vLLM's output handler started on this loop
            tasks = await llm.get_supported_tasks()
            if "embed" not in tasks:
                raise EngineError(f"{args.model!r} is not an embedding model (its tasks: {list(tasks)})")
            embedder = cls(llm, model_name)
            await embedder._probe()
            return embedder
        except BaseException:
            llm.shutdown()
            raise

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def max_input_tokens(self) -> int:
        return self._max_len

    @property
    def dead(self) -> bool:
        return bool(self._llm.errored) and not self._closed

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(ids) for ids in self._tokenizer(list(texts), add_special_tokens=True)["input_ids"]]

    async def _token_ids(self, inputs: Sequence[EmbedInput]) -> list[list[int]]:
        texts = [(i, x) for i, x in enumerate(inputs) if isinstance(x, str)]
        out: list[list[int]] = [[] if isinstance(x, str) else list(x) for x in inputs]
        if texts:
            chars = sum(len(t) for _i, t in texts)
            work = [t for _i, t in texts]
            ids = (
                self._tokenize(work) if chars < INLINE_CHARS else await run_on(TOKENIZE, self._tokenize, work)
            )
            for (i, _t), got in zip(texts, ids, strict=True):
                out[i] = got
        return out

    async def count_tokens(self, inputs: Sequence[EmbedInput]) -> list[int]:
        return [len(ids) for ids in await self._token_ids(inputs)]

    def _check(self, index: int, ids: list[int], many: bool) -> None:
        where = f"input[{index}]" if many else "input"
        if len(ids) > self._max_len:
            raise EngineRejected(
                f"This model's maximum input length is {self._max_len} tokens, however you requested "
                f"{len(ids)} tokens in {where}. Please reduce your input's length.",
                code="context_length_exceeded",
            )
        bad = next((t for t in ids if not 0 <= t < self._vocab), None)
        if bad is not None:
            raise EngineRejected(
                f"Token id {bad} in {where} is outside the model's vocabulary (0 to {self._vocab - 1}).",
                code="invalid_value",
            )

    async def _one(self, ids: list[int]) -> list[float]:
        request_id = f"embd-{uuid.uuid4().hex}"
        final = None
        async for out in self._llm.encode(
            TokensPrompt(prompt_token_ids=ids), PoolingParams(task="embed"), request_id
        ):
            final = out
        if final is None:
            raise EngineUnavailable("the embedding model returned nothing")
        vector: list[float] = final.outputs.data.float().tolist()
        return vector

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded:
        if self._closed:
            raise EngineUnavailable("the embedding model is shut down")
        ids = await self._token_ids(inputs)
        for i, one in enumerate(ids):
            self._check(i, one, len(ids) > 1)
        try:
            vectors = await asyncio.gather(*(self._one(one) for one in ids))
        except EngineDeadError as exc:
            raise EngineUnavailable(f"the embedding model stopped: {exc}") from exc
        return Embedded(list(vectors), sum(len(one) for one in ids))

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._llm.shutdown()

"""`RemoteEmbedder`: the `Embedder` interface over another server's OpenAI-compatible `POST /embeddings`."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import struct
from collections.abc import Sequence
from typing import Any

import httpx

from vllm_responses.engine.base import EngineError, EngineRejected, EngineUnavailable
from vllm_responses.engine.embedder import Embedded, EmbedInput

__all__ = ["MAX_ANSWER_BYTES", "RemoteEmbedder"]

# The most bytes one answer of the remote server may have (2048 inputs of 4096 dimensions in base64: 45 MB).
MAX_ANSWER_BYTES = 64 * 2**20
_PROBE = "dimensions probe"
# The most listed models tried, in order, for one that embeds (no model named).
MAX_TRIED = 8


class RemoteEmbedder:
    """An `Embedder` over `{url}/embeddings` (`url` as an OpenAI client's base URL, e.g. `http://host:8001/v1`).
    Each call is bounded by `timeout_s` in all and by `MAX_ANSWER_BYTES`; no proxy of the environment is used
    and no redirect followed. Its 4xx answers are the request's fault (`EngineRejected` with the remote's
    message and `param`), anything else makes it unavailable (503)."""

    def __init__(
        self, url: str, model_name: str, dimensions: int, *, timeout_s: float, api_key: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._model_name = model_name
        self._dimensions = dimensions
        self._timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            timeout=timeout_s, follow_redirects=False, trust_env=False, headers=headers
        )

    @classmethod
    async def start(
        cls, url: str, model_name: str | None, *, timeout_s: float, api_key: str | None = None
    ) -> RemoteEmbedder:
        """Learn the length of the remote model's vectors (one probe embedded); with no `model_name`, the model
        is the first that `/models` lists and that embeds the probe (a server may serve chat models too).
        Raises `EngineUnavailable` when the server does not answer, or serves no such model."""
        embedder = cls(url, model_name or "", 0, timeout_s=timeout_s, api_key=api_key)
        try:
            names = [model_name] if model_name else await embedder._listed()
            for name in names:
                embedder._model_name = name
                try:
                    embedder._dimensions = len((await embedder.embed([_PROBE])).vectors[0])
                    return embedder
                except EngineError:
                    if model_name or name == names[-1]:
                        raise
            raise EngineUnavailable(f"the embedding server at {url} lists no model")
        except BaseException:
            await embedder.aclose()
            raise

    async def _listed(self) -> list[str]:
        """The ids of the models the server lists (`GET /models`), the first `MAX_TRIED` of them."""
        listed = (await self._call("GET", "/models", None)).get("data")
        rows = listed if isinstance(listed, list) else []
        return [row["id"] for row in rows if isinstance(row, dict) and isinstance(row.get("id"), str)][
            :MAX_TRIED
        ]

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def max_input_tokens(self) -> None:
        return None

    @property
    def dead(self) -> bool:
        return False  # each call is its own: a server down now may answer the next

    async def count_tokens(self, inputs: Sequence[EmbedInput]) -> list[int]:
        return [math.ceil(len(x.encode()) / 4) if isinstance(x, str) else len(x) for x in inputs]

    async def embed(self, inputs: Sequence[EmbedInput]) -> Embedded:
        body = {
            "model": self._model_name,
            "input": [x if isinstance(x, str) else list(x) for x in inputs],
            "encoding_format": "base64",
        }
        answer = await self._call("POST", "/embeddings", body)
        try:
            rows = sorted(answer["data"], key=lambda row: int(row["index"]))
            vectors = [_vector(row["embedding"]) for row in rows]
            tokens = int((answer.get("usage") or {}).get("prompt_tokens", 0))
        except (KeyError, TypeError, ValueError, struct.error) as exc:
            raise EngineUnavailable(
                f"the embedding server at {self.url} gave an answer not understood"
            ) from exc
        if len(vectors) != len(inputs):
            raise EngineUnavailable(
                f"the embedding server gave {len(vectors)} vectors for {len(inputs)} inputs"
            )
        return Embedded(vectors, tokens)

    async def _call(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        """One request, bounded in time and bytes; its JSON object, or the error it is worth."""
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._client.stream(method, self.url + path, json=body) as r:
                    raw = bytearray()
                    async for chunk in r.aiter_bytes():
                        raw += chunk
                        if len(raw) > MAX_ANSWER_BYTES:
                            raise EngineUnavailable(
                                f"the embedding server's answer is over {MAX_ANSWER_BYTES} bytes"
                            )
                    status = r.status_code
        except TimeoutError as exc:
            raise EngineUnavailable(f"the embedding server gave no answer in {self._timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise EngineUnavailable(
                f"the embedding server could not be reached: {type(exc).__name__}"
            ) from exc
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if 400 <= status < 500 and status not in (401, 403, 404, 408, 429):
            error = answer.get("error") if isinstance(answer, dict) else None
            error = error if isinstance(error, dict) else {}
            message = str(error.get("message") or f"the embedding server refused the input (HTTP {status})")
            raise EngineRejected(message, code="invalid_value", param=str(error.get("param") or "input"))
        if status != 200 or not isinstance(answer, dict):
            raise EngineUnavailable(f"the embedding server answered HTTP {status}")
        return answer

    async def aclose(self) -> None:
        await self._client.aclose()


def _vector(value: Any) -> list[float]:
    """An `embedding` as the OpenAI API writes it: a list of floats, or base64 of little-endian float32s."""
    if isinstance(value, str):
        raw = base64.b64decode(value, validate=True)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
        return [float(v) for v in value]
    raise ValueError("not a vector")

"""`EmbeddingsService`: `POST /v1/embeddings` answered by the served embedding model, under an admission of its own."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from vllm_responses.engine.embedder import Embedder
from vllm_responses.protocol.embeddings import EmbeddingRequest, embedding_list
from vllm_responses.protocol.errors import InvalidRequest, NotFound, Unavailable
from vllm_responses.service.admission import Admission, TokenBudget, default_max_queued

__all__ = ["EmbeddingsService", "shortened"]


def shortened(vector: Sequence[float], dimensions: int) -> list[float]:
    """The first `dimensions` values of `vector`, scaled back to length 1 (as OpenAI shortens its
    text-embedding-3 vectors when `dimensions` is asked)."""
    head = list(vector[:dimensions])
    norm = math.sqrt(sum(v * v for v in head))
    return [v / norm for v in head] if norm > 0 else head


class EmbeddingsService:
    """The embedding model of this server (None: none served, every request a 503), its requests bounded:
    `max_running` at once, twice as many waiting, the rest a 429 with `Retry-After`."""

    def __init__(self, embedder: Embedder | None, max_running: int) -> None:
        self.embedder = embedder
        self.admission = Admission(
            max_running,
            default_max_queued(max_running),
            ("embedding requests", "--max-concurrent-embeddings", "its queue of"),
            metered=False,
        )

    @property
    def model_names(self) -> list[str]:
        return [self.embedder.model_name] if self.embedder is not None else []

    async def create(self, req: EmbeddingRequest, budget: TokenBudget | None = None) -> dict[str, Any]:
        """The `CreateEmbeddingResponse` for `req`; its tokens settled against `budget` (the key's tokens per
        minute: a 429 once they are spent)."""
        embedder = self._checked(req)
        settle = budget.reserve(1) if budget is not None else None
        spent = 0
        try:
            ticket = await self.admission.acquire()
            try:
                done = await embedder.embed(req.inputs)
            finally:
                ticket.release()
            spent = done.tokens
        finally:
            if settle is not None:
                settle(spent)
        vectors = done.vectors
        if req.dimensions is not None and req.dimensions < embedder.dimensions:
            vectors = [shortened(v, req.dimensions) for v in vectors]
        return embedding_list(vectors, embedder.model_name, done.tokens, req.encoding_format)

    def _checked(self, req: EmbeddingRequest) -> Embedder:
        """The embedder, when `req` names it and asks for no more dimensions than it has."""
        if self.embedder is None:
            raise Unavailable(
                "This server serves no embedding model (started with --embedding-model none, or the embedded "
                "model is not set up: run scripts/setup.sh).",
                code="embeddings_unavailable",
            )
        if req.model != self.embedder.model_name:
            raise NotFound(
                f"The model {req.model!r} does not exist; this server embeds with {self.embedder.model_name!r}.",
                param="model",
                code="model_not_found",
            )
        if req.dimensions is not None and req.dimensions > self.embedder.dimensions:
            raise InvalidRequest(
                f"Invalid value for 'dimensions': {self.embedder.model_name} makes vectors of "
                f"{self.embedder.dimensions} dimensions; ask for at most that many.",
                param="dimensions",
            )
        return self.embedder

"""all-MiniLM-L6-v2 run directly with torch and transformers from its own safetensors: mean pooling over the
attention mask, then length 1, as its sentence-transformers modules say (the reference the server must match)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["ReferenceEmbedder"]


class ReferenceEmbedder:
    """The model at `folder` loaded with transformers' `AutoModel` (float32, eval mode)."""

    def __init__(self, folder: Path, max_length: int = 256) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(folder)
        self.model: Any = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
        self.max_length = max_length

    def embed(self, texts: list[str]) -> list[list[float]]:
        torch = self.torch
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        vectors: list[list[float]] = torch.nn.functional.normalize(pooled, p=2, dim=1).tolist()
        return vectors

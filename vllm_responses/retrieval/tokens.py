"""The tokenizer chunking counts in: each token's character span in the text (`Tokenizer`), and a Hugging Face
`tokenizers` tokenizer behind it (`HFTokenizer`)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["HFTokenizer", "Tokenizer"]


class Tokenizer(Protocol):
    """What chunking needs of a tokenizer: the `(start, end)` character span of each token of `text`, in order
    (no special tokens). Spans may leave characters out (the spaces between WordPiece tokens) or share one
    character (the bytes of one character split over tokens)."""

    def token_spans(self, text: str) -> list[tuple[int, int]]: ...


class HFTokenizer:
    """A Hugging Face fast tokenizer (`tokenizer.json`) as chunking's `Tokenizer`."""

    def __init__(self, tokenizer: _HFTokenizer) -> None:
        self._tokenizer = tokenizer
        self._tokenizer.no_truncation()  # a whole file at once: no cut at the model's input length, no padding
        self._tokenizer.no_padding()

    @classmethod
    def from_file(cls, path: str | Path) -> HFTokenizer:
        """The tokenizer of a `tokenizer.json` file, or of the model folder that holds one."""
        path = Path(path)
        return cls(_HFTokenizer.from_file(str(path / "tokenizer.json" if path.is_dir() else path)))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in self._tokenizer.encode(text, add_special_tokens=False).offsets]

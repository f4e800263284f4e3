"""`InputBudget`: what one request's images and files may number and weigh, counted from its body before any is
fetched, copied out of a container or stored, then spent byte by byte as the ones elsewhere are read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.file_parts import FILE_SOURCES

__all__ = ["PARTS_FIELD", "InputBudget", "InputLimits", "Kind", "media_parts"]

# The items whose list of parts may hold images and files, and the field that holds it.
PARTS_FIELD = {"message": "content", "function_call_output": "output", "custom_tool_call_output": "output"}

Kind = Literal["image", "file"]


@dataclass(frozen=True)
class InputLimits:
    """Per request: images and files given (`--max-images`, `--max-input-files`) and their bytes in all
    (`--max-images-total-bytes`, `--input-files-max-total-bytes`); `takes_images`: the served model reads
    images (else any `input_image` is refused)."""

    max_images: int = 16
    max_image_total_bytes: int = 32 * 1024 * 1024
    max_files: int = 16
    max_file_total_bytes: int = 32 * 1024 * 1024
    takes_images: bool = True


def media_parts(items: list[dict[str, Any]], param: str) -> Iterator[tuple[str, Kind, dict[str, Any]]]:
    """The `input_image` and `input_file` parts of `items` (wire form) with something to read, each with its
    place (`input[i].content[j]`) and kind."""
    for i, item in enumerate(items):
        field = PARTS_FIELD.get(str(item.get("type", "message")))
        parts = item.get(field) if field else None
        for j, part in enumerate(parts if isinstance(parts, list) else ()):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "input_file" and not any(part.get(key) for key in FILE_SOURCES):
                continue  # sent back as kept (its text, no source): nothing to read
            if kind in ("input_image", "input_file"):
                yield f"{param}[{i}].{field}[{j}]", "image" if kind == "input_image" else "file", part


class InputBudget:
    """One request's images and files counted and their inline bytes spent when it is made (a 400 naming the
    part that went past a limit); `spend` takes the bytes of the ones read from elsewhere as they arrive."""

    def __init__(self, items: list[dict[str, Any]], param: str, limits: InputLimits) -> None:
        self.limits = limits
        self.left: dict[Kind, int] = {
            "image": limits.max_image_total_bytes,
            "file": limits.max_file_total_bytes,
        }
        counts: dict[Kind, int] = {"image": 0, "file": 0}
        for where, kind, _part in media_parts(items, param):
            if kind == "image" and not limits.takes_images:
                raise InvalidRequest(
                    "The served model reads text only; it cannot take an input_image.",
                    param=where,
                    code="unsupported_value",
                )
            counts[kind] += 1
            if counts[kind] > self._most(kind):
                raise InvalidRequest(
                    f"Too many {kind}s: at most {self._most(kind)} per request.",
                    param=where,
                    code=f"too_many_{kind}s",
                )
        for where, kind, part in media_parts(items, param):
            inline = part.get("image_url" if kind == "image" else "file_data")
            if isinstance(inline, str) and (kind == "file" or inline.startswith("data:")):
                self.spend(kind, _decoded_size(inline), where)

    def spend(self, kind: Kind, size: int, where: str) -> None:
        """Take `size` bytes of a `kind`'s part at `where`: a 400 once the request's total for its kind is past."""
        self.left[kind] -= size
        if self.left[kind] < 0:
            total = self.limits.max_image_total_bytes if kind == "image" else self.limits.max_file_total_bytes
            raise InvalidRequest(
                f"The {kind}s of this request are past this server's limit of {total} bytes in all.",
                param=where,
                code=f"{kind}_too_large",
            )

    def _most(self, kind: Kind) -> int:
        return self.limits.max_images if kind == "image" else self.limits.max_files


def _decoded_size(text: str) -> int:
    """The bytes a base64 text (or a data URL's) decodes to, from its length alone."""
    data = text.partition(",")[2] if text.startswith("data:") else text
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))

"""Memory sizes: read ('1g', '512m'), written back, and a `memory_limit` as its WebAssembly heap cap."""

from __future__ import annotations

import re

from interpreter_service.api import MemoryLimitRefused

__all__ = ["WASM32_MAX_BYTES", "format_size", "memory_tier", "parse_size"]

# Python runs as 32-bit WebAssembly: its heap can never exceed 4 GiB (65536 pages of 64 KiB).
WASM32_MAX_BYTES = 4 << 30


def parse_size(text: str | int) -> int:
    """'1g' / '512m' / '1048576' -> bytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgKMG]?)(?:i?[bB])?\s*", text)
    if not m:
        raise ValueError(f"bad size {text!r} (use e.g. '512m' or '1g')")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def format_size(n: int) -> str:
    """Bytes as the largest whole unit: 1073741824 -> '1g', 536870912 -> '512m'."""
    for unit, shift in (("g", 30), ("m", 20), ("k", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n / (1 << 20):.1f}m" if n >= 1 << 20 else str(n)


def memory_tier(memory_limit: str | int) -> int:
    """The WebAssembly heap cap of a `memory_limit` ('1g', '4g', '512m'): its bytes, at most 4 GiB.

    OpenAI's tiers '16g' and '64g' are refused (`MemoryLimitRefused`), not mapped to 4 GiB: code that asked
    for 16 GiB would otherwise meet a MemoryError it had reason not to expect."""
    try:
        size = parse_size(memory_limit)
    except ValueError as e:
        raise MemoryLimitRefused(str(e)) from None
    if size > WASM32_MAX_BYTES:
        raise MemoryLimitRefused(
            f"memory_limit {memory_limit!r} is more than the sandbox can give: Python runs as 32-bit "
            "WebAssembly, which addresses at most 4 GiB; use '1g' or '4g'"
        )
    if size < 64 << 20:
        raise MemoryLimitRefused(f"memory_limit {memory_limit!r} is too small (at least '64m')")
    return size

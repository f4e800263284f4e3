"""vLLM engine command-line arguments (vLLM's own definitions) plus our CPU-friendly defaults."""

from __future__ import annotations

import argparse
import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm.engine.arg_utils import AsyncEngineArgs

__all__ = [
    "CPU_ENV_DEFAULTS",
    "DEFAULT_MAX_MODEL_LEN",
    "add_engine_cli_args",
    "apply_cpu_env_defaults",
    "cpu_dtype",
    "cpu_flags",
    "engine_args_from_namespace",
    "is_cpu_platform",
]

DEFAULT_MAX_MODEL_LEN = 4096
# Small KV cache (GiB) and no reserved core: right for the small models on 2-core CI hosts.
CPU_ENV_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU feature flags listed in /proc/cpuinfo (empty where it cannot be read)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_dtype(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """bfloat16 where the CPU computes it natively (avx512_bf16 / amx_bf16), else float32.

    On an AVX2-only host bf16 runs 2-5x slower than float32 under concurrency.
    """
    return "bfloat16" if cpu_flags(cpuinfo) & _BF16_FLAGS else "float32"


_SHADOWED = "_vr_shadowed_engine_args"


def add_engine_cli_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add vLLM's engine arguments (`AsyncEngineArgs.add_cli_args`) to `parser` (or a sub-parser).

    vLLM's own argument actions are moved over group by group (nothing is redefined here). An option
    string `parser` already has (e.g. our `--log-level`) stays ours: vLLM's option of that name is left
    out and its value is not passed to vLLM. `--model` and `--dtype` default to None here so that "not
    given" can be told apart: see `engine_args_from_namespace`. Imports vLLM (a few seconds).
    """
    from vllm.engine.arg_utils import AsyncEngineArgs

    scratch = argparse.ArgumentParser(add_help=False)
    AsyncEngineArgs.add_cli_args(scratch)  # type: ignore[arg-type]  # plain argparse suffices
    taken = set(parser._option_string_actions)
    shadowed: list[str] = []
    for group in scratch._action_groups:
        target: Any = None
        for action in group._group_actions:
            if any(opt in taken for opt in action.option_strings):
                shadowed.append(action.dest)
                continue
            if target is None:
                target = parser.add_argument_group(group.title, group.description)
            target._add_action(action)
    if "--model" not in parser._option_string_actions:  # vLLM hides it when argv has "serve" and "--help"
        parser.add_argument("--model", help="Model name or path (default: the embedded default model).")
    parser.set_defaults(model=None, dtype=None, **{_SHADOWED: tuple(shadowed)})
    return parser


def is_cpu_platform() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def apply_cpu_env_defaults(env: dict[str, str] | None = None) -> None:
    """Set the CPU KV-cache env defaults unless the user set them (must run before the engine starts)."""
    target: Any = os.environ if env is None else env
    for key, value in CPU_ENV_DEFAULTS.items():
        target.setdefault(key, value)


def engine_args_from_namespace(
    ns: argparse.Namespace, model_default: str, *, cpu: bool | None = None
) -> AsyncEngineArgs:
    """Build `AsyncEngineArgs` from parsed arguments, applying our defaults.

    - `--model` falls back to `model_default`;
    - `--dtype` not given: `cpu_dtype()` on CPU, vLLM's "auto" elsewhere;
    - on CPU: `enforce_eager=True` (torch.compile start-up took 85-130 s) and the small KV-cache env;
    - `--max-model-len` not given: `DEFAULT_MAX_MODEL_LEN` on CPU (keeps the KV cache small).
    `cpu` overrides platform detection (for tests).
    """
    from vllm.engine.arg_utils import AsyncEngineArgs

    on_cpu = is_cpu_platform() if cpu is None else cpu
    ns = copy.copy(ns)
    for dest in getattr(ns, _SHADOWED, ()):  # our options of the same name are not vLLM's
        if hasattr(ns, dest):
            delattr(ns, dest)
    if getattr(ns, "model", None) is None:
        ns.model = str(model_default)
    if getattr(ns, "dtype", None) is None:
        ns.dtype = cpu_dtype() if on_cpu else "auto"
    if on_cpu:
        ns.enforce_eager = True
        if getattr(ns, "max_model_len", None) is None:
            ns.max_model_len = DEFAULT_MAX_MODEL_LEN
        apply_cpu_env_defaults()
    args: AsyncEngineArgs = AsyncEngineArgs.from_cli_args(ns)  # vLLM leaves it unannotated: cls(...)
    return args

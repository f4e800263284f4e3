"""vLLM's engine CLI arguments on our argparse parsers, our CPU defaults, and the dtype choice."""

from __future__ import annotations

import argparse

import pytest

from vllm_responses.engine.args import (
    DEFAULT_MAX_MODEL_LEN,
    add_engine_cli_args,
    apply_cpu_env_defaults,
    cpu_dtype,
    cpu_flags,
    engine_args_from_namespace,
)


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return add_engine_cli_args(argparse.ArgumentParser(prog="vllm-responses"))


def write_cpuinfo(tmp_path, flags: str):
    path = tmp_path / "cpuinfo"
    cpu = f"model name\t: X\nflags\t\t: {flags}\n"
    path.write_text(f"processor\t: 0\n{cpu}\nprocessor\t: 1\n{cpu}")
    return path


def test_cpu_dtype_follows_the_bf16_flags(tmp_path):
    assert cpu_dtype(write_cpuinfo(tmp_path, "fpu sse2 avx2 avx512f avx512_bf16")) == "bfloat16"
    assert cpu_dtype(write_cpuinfo(tmp_path, "fpu sse2 avx2 amx_bf16 amx_tile")) == "bfloat16"
    assert cpu_dtype(write_cpuinfo(tmp_path, "fpu sse2 avx2 avx512f")) == "float32"
    assert cpu_dtype(tmp_path / "missing") == "float32"
    assert "avx2" in cpu_flags(write_cpuinfo(tmp_path, "avx2"))


def test_defaults_on_cpu(parser, monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    args = engine_args_from_namespace(parser.parse_args([]), "/models/default", cpu=True)
    assert args.model == "/models/default"
    assert args.dtype == cpu_dtype()
    assert args.enforce_eager is True
    assert args.max_model_len == DEFAULT_MAX_MODEL_LEN
    import os

    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_explicit_values_win(parser, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    ns = parser.parse_args(
        "--model m --dtype float16 --max-model-len 1024 --tensor-parallel-size 2 --seed 3".split()
    )
    args = engine_args_from_namespace(ns, "/models/default", cpu=True)
    assert (args.model, args.dtype, args.max_model_len) == ("m", "float16", 1024)
    assert (args.tensor_parallel_size, args.seed) == (2, 3)
    import os

    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "4"
    assert ns.dtype == "float16"  # the namespace itself is not modified


def test_off_cpu_leaves_vllm_defaults(parser):
    args = engine_args_from_namespace(parser.parse_args([]), "m", cpu=False)
    assert args.dtype == "auto" and args.enforce_eager is False and args.max_model_len is None


def test_works_on_a_subparser_next_to_our_own_options():
    top = argparse.ArgumentParser(prog="vllm-responses")
    sub = top.add_subparsers(dest="cmd")
    serve = sub.add_parser("serve")
    serve.add_argument("--port", type=int, default=8000)
    add_engine_cli_args(serve)
    ns = top.parse_args(["serve", "--port", "9000", "--data-parallel-size", "2", "--enable-prefix-caching"])
    assert (ns.cmd, ns.port, ns.data_parallel_size, ns.enable_prefix_caching) == ("serve", 9000, 2, True)
    assert engine_args_from_namespace(ns, "m", cpu=True).data_parallel_size == 2


def test_env_defaults_do_not_override(monkeypatch):
    env = {"VLLM_CPU_KVCACHE_SPACE": "8"}
    apply_cpu_env_defaults(env)
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "8", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def test_our_options_shadow_vllm_options_of_the_same_name():
    serve = argparse.ArgumentParser(prog="vllm-responses")
    serve.add_argument("--log-level", default="info", choices=["info", "debug"])
    add_engine_cli_args(serve)
    ns = serve.parse_args(["--log-level", "debug", "--max-num-seqs", "64"])
    assert ns.log_level == "debug" and ns.max_num_seqs == 64
    args = engine_args_from_namespace(ns, "m", cpu=True)
    assert args.log_level is None  # not handed to vLLM (its --log-level takes upper-case names)
    assert args.max_num_seqs == 64
    groups = {g.title for g in serve._action_groups}
    assert {"ModelConfig", "CacheConfig", "ParallelConfig"} <= groups  # vLLM's own groups, moved over

"""The `vllm-responses` command: parses flags (ours, then vLLM's own engine flags) and calls `server.run`.

Every flag of ours can also be given as an environment variable `VLLM_RESPONSES_<FLAG>` (dashes as
underscores, e.g. `VLLM_RESPONSES_PORT=9000`); `VR_CODE_INTERPRETER_WORKERS` is honoured too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from vllm_responses.config import Config

__all__ = ["build_parser", "config_from_args", "main"]

_OURS: list[tuple[str, dict[str, Any]]] = [
    ("--host", {"default": "127.0.0.1", "help": "Address to listen on."}),
    ("--port", {"type": int, "default": 8000, "help": "Port to listen on."}),
    ("--db", {"default": "~/.cache/vllm-responses/responses.db",
              "help": "SQLite file for stored responses (':memory:' keeps them in process only)."}),
    ("--api-key", {"default": None, "help": "Require 'Authorization: Bearer KEY' on /v1 routes."}),
    ("--code-interpreter-workers", {"type": int, "default": 2, "help": "Warm sandbox workers started with the server."}),
    ("--code-interpreter-timeout", {"type": float, "default": 30.0, "help": "Seconds one code cell may run."}),
    ("--code-interpreter-allow-net", {"default": "",
                                      "help": "Comma-separated hosts sandboxed code may reach (default: none)."}),
    ("--code-interpreter-idle-expiry", {"type": float, "default": 1200.0,
                                        "help": "Seconds an idle container lives before its worker is recycled."}),
    ("--max-turns", {"type": int, "default": 8, "help": "Model calls one response may make (agent-loop bound)."}),
    ("--tool-call-parser", {"default": None,
                            "help": "Tool-call format of the model (hermes, llama3_json, pythonic, harmony, "
                                    "markdown_code, auto, ...); default: chosen from the chat template."}),
    ("--log-level", {"default": "info", "choices": ["critical", "error", "warning", "info", "debug"],
                     "help": "Log level."}),
]


def _env_default(flag: str, default: Any) -> Any:
    name = "VLLM_RESPONSES_" + flag.lstrip("-").replace("-", "_").upper()
    if flag == "--code-interpreter-workers" and "VR_CODE_INTERPRETER_WORKERS" in os.environ:
        return os.environ["VR_CODE_INTERPRETER_WORKERS"]
    return os.environ.get(name, default)


def build_parser(*, with_engine_args: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-responses", description="OpenAI Responses API server with vLLM and a sandboxed code interpreter."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="Serve a model (the embedded default model when --model is not given).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ours = serve.add_argument_group("vllm-responses")
    for flag, kwargs in _OURS:
        ours.add_argument(flag, **{**kwargs, "default": _env_default(flag, kwargs.get("default"))})
    ours.add_argument("--no-code-interpreter", action="store_true",
                      default=bool(os.environ.get("VLLM_RESPONSES_NO_CODE_INTERPRETER")),
                      help="Do not start the sandbox pool; requests with the code_interpreter tool get a 400.")
    if with_engine_args:
        from vllm_responses.engine.args import add_engine_cli_args

        add_engine_cli_args(serve)
    return parser


def config_from_args(ns: argparse.Namespace) -> Config:
    from vllm_responses.engine.args import engine_args_from_namespace
    from vllm_responses.engine.models import default_model_path

    model = getattr(ns, "model", None)
    args = engine_args_from_namespace(ns, str(default_model_path()) if model is None else model)
    served = getattr(ns, "served_model_name", None) or []
    if isinstance(served, str):
        served = [served]
    if not served:
        served = [os.path.basename(str(args.model).rstrip("/")) if model is None else str(args.model)]
    return Config(
        host=ns.host,
        port=int(ns.port),
        model=str(args.model),
        served_model_names=tuple(served),
        db=ns.db,
        api_key=ns.api_key,
        code_interpreter=not ns.no_code_interpreter,
        code_interpreter_workers=int(ns.code_interpreter_workers),
        code_interpreter_timeout=float(ns.code_interpreter_timeout),
        code_interpreter_allow_net=tuple(h for h in str(ns.code_interpreter_allow_net).split(",") if h),
        code_interpreter_idle_expiry=float(ns.code_interpreter_idle_expiry),
        max_turns=int(ns.max_turns),
        tool_parser=ns.tool_call_parser,
        log_level=ns.log_level,
        engine_args={"args": args},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command == "serve":
        from vllm_responses.engine.base import EngineError
        from vllm_responses.server import run

        try:
            config = config_from_args(ns)
        except EngineError as exc:
            print(f"vllm-responses: {exc.message}", file=sys.stderr)
            return 2
        return run(config)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())

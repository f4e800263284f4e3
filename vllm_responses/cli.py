"""The `vllm-responses` command: parses flags (ours, then vLLM's own engine flags) and calls `server.run`.

Every flag of ours can also be given as an environment variable `VLLM_RESPONSES_<FLAG>` (dashes as
underscores, e.g. `VLLM_RESPONSES_PORT=9000`; `VLLM_RESPONSES_NO_CODE_INTERPRETER=1` for the switch), and
`--code-interpreter-workers` as `VR_CODE_INTERPRETER_WORKERS` too. Defaults are `Config`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from vllm_responses.config import Config

__all__ = ["build_parser", "config_from_args", "main"]


def _at_least(least: int) -> Callable[[str], int]:
    """An argparse `type`: an integer of at least `least` (admission's counts), else a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


# (flag, the `Config` field it sets, argparse options): the default is that field's default.
_OURS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--host", "host", {"help": "Address to listen on."}),
    ("--port", "port", {"type": int, "help": "Port to listen on."}),
    ("--db", "db", {"help": "SQLite file, Postgres URL or ':memory:' (in process) for stored responses."}),
    ("--api-key", "api_key", {"help": "Require 'Authorization: Bearer KEY' on /v1 routes."}),
    (
        "--code-interpreter-workers",
        "code_interpreter_workers",
        {"type": int, "help": "Warm sandbox workers started with the server."},
    ),
    (
        "--code-interpreter-timeout",
        "code_interpreter_timeout",
        {"type": float, "help": "Seconds one code cell may run."},
    ),
    (
        "--code-interpreter-allow-net",
        "code_interpreter_allow_net",
        {"help": "Comma-separated hosts sandboxed code may reach (default: none)."},
    ),
    (
        "--code-interpreter-idle-expiry",
        "code_interpreter_idle_expiry",
        {"type": float, "help": "Seconds an idle container lives before its worker is recycled."},
    ),
    # --- sandbox (issue 16) ---
    (
        "--code-interpreter-max-workers",
        "code_interpreter_max_workers",
        {
            "type": int,
            "help": "Most sandbox containers at once (default: memory budget / one worker's memory).",
        },
    ),
    (
        "--code-interpreter-memory-budget",
        "code_interpreter_memory_budget",
        {
            "help": "Memory all sandbox workers may use together, e.g. 8g (default: half of the machine's RAM)."
        },
    ),
    (
        "--code-interpreter-queue-timeout",
        "code_interpreter_queue_timeout",
        {"type": float, "help": "Seconds a code call or POST /v1/containers waits for a free container."},
    ),
    (
        "--code-interpreter-user",
        "code_interpreter_user",
        {
            "help": "User the sandbox workers run as (default: nobody when run as root; '' for the server's own)."
        },
    ),
    # --- end sandbox ---
    (
        "--max-turns",
        "max_turns",
        {"type": int, "help": "Model calls one response may make (agent-loop bound)."},
    ),
    (
        "--tool-call-parser",
        "tool_parser",
        {
            "help": "Tool-call format of the model (hermes, llama3_json, pythonic, harmony, markdown_code, auto, "
            "..., or any of vLLM's tool-call parser names, e.g. qwen3_xml, kimi_k2, glm45; see docs/parsers.md); "
            "default: chosen from the chat template."
        },
    ),
    (
        "--log-level",
        "log_level",
        {"choices": ["critical", "error", "warning", "info", "debug"], "help": "Log level."},
    ),
    # --- observe (issue 16) ---
    (
        "--log-format",
        "log_format",
        {"choices": ["text", "json"], "help": "Log lines as text or as one JSON object each."},
    ),
    (
        "--sse-keepalive",
        "sse_keepalive",
        {"type": float, "help": "Seconds of silence after which a stream gets an SSE comment (0: never)."},
    ),
    (
        "--shutdown-grace",
        "shutdown_grace",
        {"type": float, "help": "Seconds running responses may go on after SIGTERM before they are ended."},
    ),
    # --- limits (issue 16) ---
    (
        "--max-request-bytes",
        "max_request_bytes",
        {"type": int, "help": "Largest request body in bytes; past it a 413, before the rest is read."},
    ),
    (
        "--max-upload-bytes",
        "max_upload_bytes",
        {"type": int, "help": "Largest container file upload (multipart) in bytes; past it a 413."},
    ),
    # --- admission (issue 16) ---
    (
        "--max-concurrent-responses",
        "max_concurrent_responses",
        {"type": _at_least(1), "help": "Responses running at once (default: the engine's max_num_seqs)."},
    ),
    (
        "--max-queued-responses",
        "max_queued_responses",
        {
            "type": _at_least(0),
            "help": "Requests waiting for a running slot, FIFO (default: twice the former); 429 past them.",
        },
    ),
    # --- MCP tools (issue 17) ---
    (
        "--mcp-timeout",
        "mcp_timeout",
        {
            "type": float,
            "help": "Seconds one remote MCP tool listing or call may take (connecting included).",
        },
    ),
    (
        "--mcp-allowed-urls",
        "mcp_allowed_urls",
        {
            "help": "Comma-separated URL prefixes of the remote MCP servers requests may name ('*': any "
            "http(s) URL; default: none, remote MCP tools are refused)."
        },
    ),
    # --- shared sandbox service (issue 18) ---
    (
        "--code-interpreter-url",
        "code_interpreter_url",
        {
            "help": "Use the shared sandbox service at this URL (python -m interpreter_service serve) instead "
            "of starting sandbox workers here (default: start them here)."
        },
    ),
    (
        "--code-interpreter-token",
        "code_interpreter_token",
        # "%(default).0s" keeps a token from the environment out of --help (it prints no character of it)
        {
            "help": "Bearer token for the shared sandbox service (its --token); better given as "
            "VLLM_RESPONSES_CODE_INTERPRETER_TOKEN.%(default).0s"
        },
    ),
    # --- end shared sandbox service ---
    # --- Postgres store (issue 18) ---
    (
        "--db-pool-size",
        "db_pool_size",
        {"type": _at_least(1), "help": "Most connections to a Postgres --db (this process)."},
    ),
    # --- replicas (issue 18) ---
    (
        "--replica-id",
        "replica_id",
        {"help": "This server's name in the leases of its responses (default: random)."},
    ),
    (
        "--replica-heartbeat",
        "replica_heartbeat",
        {"type": float, "help": "Seconds between lease renewals, cross-replica cancel checks and sweeps."},
    ),
    (
        "--replica-lease",
        "replica_lease",
        {"type": float, "help": "Seconds a lease lasts unrenewed; then its responses are marked failed."},
    ),
    # --- persisted events (issue 18) ---
    (
        "--restream-poll-interval",
        "restream_poll_interval",
        {
            "type": float,
            "help": "Seconds between store reads of a background response re-streamed on a replica that "
            "does not run it.",
        },
    ),
)
# another name the sandbox pool's settings went by, honoured for this flag (it wins over VLLM_RESPONSES_...)
_ALIASES = {"--code-interpreter-workers": "VR_CODE_INTERPRETER_WORKERS"}
_CONFIG_DEFAULTS = Config()
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def _env_name(flag: str) -> str:
    """The environment variable of one of our flags: `--max-turns` -> `VLLM_RESPONSES_MAX_TURNS`."""
    return "VLLM_RESPONSES_" + flag.lstrip("-").replace("-", "_").upper()


def _default(flag: str, field: str) -> Any:
    """The flag's default: its environment variable (a string, which argparse converts with `type`), else
    the `Config` field's default (a tuple joined with commas, as the flag is written)."""
    for name in (_ALIASES.get(flag), _env_name(flag)):
        if name and name in os.environ:
            return os.environ[name]
    value = getattr(_CONFIG_DEFAULTS, field)
    return ",".join(value) if isinstance(value, tuple) else value


def _boolean(name: str) -> Callable[[str], bool]:
    """An argparse `type` for a boolean from the environment variable `name`; other words are a CLI error."""

    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise argparse.ArgumentTypeError(
            f"{name}={text!r} is not a boolean: use 1, true, yes, on or 0, false, no, off"
        )

    return parse


class _Switch(argparse.Action):
    """An on/off flag (`store_true`) whose default may be a boolean word from the environment, parsed by
    `type` (argparse converts string defaults with it, and reports a bad one as a usage error)."""

    def __init__(self, option_strings: Sequence[str], dest: str, env: str, help: str | None = None) -> None:
        default = os.environ.get(env, False)
        super().__init__(option_strings, dest, nargs=0, default=default, type=_boolean(env), help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True)


def build_parser(*, with_engine_args: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-responses",
        description="OpenAI Responses API server with vLLM and a sandboxed code interpreter.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="Serve a model (the embedded default model when --model is not given).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ours = serve.add_argument_group("vllm-responses")
    for flag, field, kwargs in _OURS:
        ours.add_argument(flag, default=_default(flag, field), **kwargs)
    ours.add_argument(
        "--no-code-interpreter",
        action=_Switch,
        env=_env_name("--no-code-interpreter"),
        help="Do not start the sandbox pool; requests with the code_interpreter tool get a 400.",
    )
    # --- Postgres store (issue 18): `vllm-responses db upgrade` ---
    db = sub.add_parser("db", help="Database maintenance.").add_subparsers(dest="db_command", required=True)
    upgrade = db.add_parser(
        "upgrade", help="Migrate the store's schema to this version's (as start-up does)."
    )
    upgrade.add_argument("--db", default=_default("--db", "db"), help="SQLite file or Postgres URL.")
    if with_engine_args:
        from vllm_responses.engine.args import add_engine_cli_args

        add_engine_cli_args(serve)
    return parser


def config_from_args(ns: argparse.Namespace) -> Config:
    from vllm_responses.engine.args import engine_args_from_namespace
    from vllm_responses.engine.models import default_model_path
    from vllm_responses.engine.parser_names import check_parser_names

    model = getattr(ns, "model", None)
    args = engine_args_from_namespace(ns, str(default_model_path()) if model is None else model)
    # --- vLLM parsers (issue 17): an unknown parser name fails here, before the model loads ---
    check_parser_names(ns.tool_call_parser, getattr(args, "reasoning_parser", None) or None)
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
        # --- sandbox (issue 16) ---
        code_interpreter_max_workers=ns.code_interpreter_max_workers,
        code_interpreter_memory_budget=ns.code_interpreter_memory_budget or None,
        code_interpreter_queue_timeout=float(ns.code_interpreter_queue_timeout),
        code_interpreter_user=ns.code_interpreter_user,
        # --- end sandbox ---
        max_turns=int(ns.max_turns),
        tool_parser=ns.tool_call_parser,
        log_level=ns.log_level,
        engine_args={"args": args},
        log_format=ns.log_format,
        sse_keepalive=float(ns.sse_keepalive),
        shutdown_grace=float(ns.shutdown_grace),
        # --- limits (issue 16) ---
        max_request_bytes=int(ns.max_request_bytes),
        max_upload_bytes=int(ns.max_upload_bytes),
        # --- admission (issue 16) ---
        max_concurrent_responses=ns.max_concurrent_responses,
        max_queued_responses=ns.max_queued_responses,
        # --- MCP tools (issue 17) ---
        mcp_timeout=float(ns.mcp_timeout),
        mcp_allowed_urls=tuple(u.strip() for u in str(ns.mcp_allowed_urls).split(",") if u.strip()),
        # --- shared sandbox service (issue 18) ---
        code_interpreter_url=ns.code_interpreter_url or None,
        code_interpreter_token=ns.code_interpreter_token or None,
        # --- Postgres store (issue 18) ---
        db_pool_size=int(ns.db_pool_size),
        # --- replicas (issue 18) ---
        replica_id=ns.replica_id or None,
        replica_heartbeat=float(ns.replica_heartbeat),
        replica_lease=float(ns.replica_lease),
        # --- persisted events (issue 18) ---
        restream_poll_interval=float(ns.restream_poll_interval),
    )


def _db_upgrade(db: str) -> int:
    """`vllm-responses db upgrade`: migrate the store `db` names; 2 when it is newer than this code."""
    import asyncio

    from vllm_responses.store.migrations import SchemaTooNew, upgrade

    if db == ":memory:":
        print("vllm-responses: ':memory:' has no schema to upgrade", file=sys.stderr)
        return 2
    try:
        before, after = asyncio.run(upgrade(db))
    except SchemaTooNew as exc:
        print(f"vllm-responses: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the database unreachable, refused, ...: the operator reads why
        print(f"vllm-responses: db upgrade failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"schema version {before} -> {after}" if before != after else f"schema version {after}: up to date")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ns = build_parser(with_engine_args=argv[:1] != ["db"]).parse_args(argv)  # `serve` or `db upgrade`
    if ns.command == "db":
        return _db_upgrade(ns.db)
    from vllm_responses.engine.base import EngineError
    from vllm_responses.server import run

    try:
        config = config_from_args(ns)
    except EngineError as exc:
        print(f"vllm-responses: {exc.message}", file=sys.stderr)
        return 2
    return run(config)

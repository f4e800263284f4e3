"""The `vllm-responses` command: `serve` (our flags, then vLLM's engine flags; `server.run`), `db upgrade`.

Our flags are made from `config.SETTINGS`: each can also be given as its environment variable
`VLLM_RESPONSES_<FLAG>` (dashes as underscores, e.g. `VLLM_RESPONSES_PORT=9000`;
`VLLM_RESPONSES_NO_CODE_INTERPRETER=1` for the switch), and its default is `Config`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vllm_responses.config import SETTINGS, Config, Setting

if TYPE_CHECKING:
    from vllm.engine.arg_utils import AsyncEngineArgs

__all__ = ["build_parser", "config_from_args", "main"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def _default(setting: Setting) -> Any:
    """The flag's default: its environment variable (a string, which argparse converts with `type`), else
    the `Config` field's default (a tuple joined with commas, as the flag is written)."""
    for name in setting.env_names:
        if name in os.environ:
            return os.environ[name]
    value = setting.default
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


def _add_setting(group: argparse._ArgumentGroup, setting: Setting) -> None:
    """One flag of ours, as `setting` declares it."""
    if setting.switch:
        group.add_argument(setting.flag, action=_Switch, env=setting.env, help=setting.help)
        return
    options: dict[str, Any] = {"type": setting.parse} if setting.parse else {}
    if setting.choices:
        options["choices"] = list(setting.choices)
    group.add_argument(setting.flag, default=_default(setting), help=setting.help, **options)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser], with_engine_args: bool) -> None:
    """`vllm-responses serve`: our flags (switches last), then vLLM's engine flags."""
    serve = sub.add_parser(
        "serve",
        help="Serve a model (the embedded default model when --model is not given).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ours = serve.add_argument_group("vllm-responses")
    for setting in sorted(SETTINGS.values(), key=lambda s: s.switch):
        _add_setting(ours, setting)
    if with_engine_args:
        from vllm_responses.engine.args import add_engine_cli_args

        add_engine_cli_args(serve)


def _add_db(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`vllm-responses db upgrade [--db DB]`."""
    db = sub.add_parser("db", help="Database maintenance.").add_subparsers(dest="db_command", required=True)
    upgrade = db.add_parser(
        "upgrade", help="Migrate the store's schema to this version's (as start-up does)."
    )
    upgrade.add_argument("--db", default=_default(SETTINGS["db"]), help="SQLite file or Postgres URL.")


def build_parser(*, with_engine_args: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-responses",
        description="OpenAI Responses API server with vLLM and a sandboxed code interpreter.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub, with_engine_args)
    _add_db(sub)
    return parser


def _engine_part(ns: argparse.Namespace) -> tuple[AsyncEngineArgs, tuple[str, ...]]:
    """vLLM's engine arguments and the served model names; an unknown parser name fails here, before the
    model loads."""
    from vllm_responses.engine.args import engine_args_from_namespace
    from vllm_responses.engine.models import default_model_path
    from vllm_responses.engine.parser_names import check_parser_names

    model = getattr(ns, "model", None)
    args = engine_args_from_namespace(ns, str(default_model_path()) if model is None else model)
    check_parser_names(ns.tool_call_parser, getattr(args, "reasoning_parser", None) or None)
    served = getattr(ns, "served_model_name", None) or []
    if isinstance(served, str):
        served = [served]
    if not served:
        served = [os.path.basename(str(args.model).rstrip("/")) if model is None else str(args.model)]
    return args, tuple(served)


def config_from_args(ns: argparse.Namespace) -> Config:
    args, served = _engine_part(ns)
    ours = {name: setting.to_config(getattr(ns, setting.dest)) for name, setting in SETTINGS.items()}
    return Config(model=str(args.model), served_model_names=served, engine_args={"args": args}, **ours)


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
    from vllm_responses.api.auth import KeyRing, KeysFileError
    from vllm_responses.engine.base import EngineError
    from vllm_responses.server import run

    try:
        config = config_from_args(ns)
        KeyRing.from_config(config)  # a malformed keys file stops the start here, with its message
    except EngineError as exc:
        print(f"vllm-responses: {exc.message}", file=sys.stderr)
        return 2
    except KeysFileError as exc:
        print(f"vllm-responses: {exc}", file=sys.stderr)
        return 2
    return run(config)

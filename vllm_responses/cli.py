"""The `vllm-responses` command: `serve` (our flags, then vLLM's engine flags; `server.run`), `db upgrade`.

Our flags are made from `config.SETTINGS`: each can also be given as its environment variable
`VLLM_RESPONSES_<FLAG>` (dashes as underscores, e.g. `VLLM_RESPONSES_PORT=9000`;
`VLLM_RESPONSES_NO_CODE_INTERPRETER=1` for the switch), and its default is `Config`'s.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vllm_responses.api.hosts import is_loopback
from vllm_responses.config import SETTINGS, Config, Setting

if TYPE_CHECKING:
    from vllm.engine.arg_utils import AsyncEngineArgs

__all__ = ["build_parser", "config_from_args", "exposure_refusal", "main"]

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


_PASSWORD = re.compile(r"(?<=://)([^/:@\s]*):[^@/\s]*@")


def masked(text: str) -> str:
    """`text` with the password of any URL in it (`postgresql://user:pw@host/db`) shown as `***`."""
    return _PASSWORD.sub(r"\1:***@", text)


def _help(setting: Setting, default: Any) -> str:
    """The flag's help; a default with a URL password in it (from the environment) is shown masked."""
    if isinstance(default, str) and masked(default) != default:
        return f"{setting.help} (default: {masked(default).replace('%', '%%')})%(default).0s"
    return setting.help


def _add_setting(group: argparse._ArgumentGroup, setting: Setting) -> None:
    """One flag of ours, as `setting` declares it."""
    if setting.switch:
        group.add_argument(setting.flag, action=_Switch, env=setting.env, help=setting.help)
        return
    options: dict[str, Any] = {"type": setting.parse} if setting.parse else {}
    if setting.choices:
        options["choices"] = list(setting.choices)
    default = _default(setting)
    group.add_argument(setting.flag, default=default, help=_help(setting, default), **options)


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
    default = _default(SETTINGS["db"])
    shown = f" (default: {masked(default).replace('%', '%%')})" if isinstance(default, str) else ""
    upgrade.add_argument("--db", default=default, help=f"SQLite file or Postgres URL{shown}.%(default).0s")


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


def _ours(ns: argparse.Namespace) -> dict[str, Any]:
    """Our settings from the parsed flags, by `Config` field name."""
    return {name: setting.to_config(getattr(ns, setting.dest)) for name, setting in SETTINGS.items()}


def config_from_args(ns: argparse.Namespace) -> Config:
    args, served = _engine_part(ns)
    return Config(model=str(args.model), served_model_names=served, engine_args={"args": args}, **_ours(ns))


def exposure_refusal(config: Config) -> str | None:
    """Why the server must not start with these settings (checked before the engine loads): a key given
    empty, or a `--host` beyond loopback with no API key and no `--allow-unauthenticated`. None: it may."""
    for flag, value in (("--api-key", config.api_key), ("--operator-key", config.operator_key)):
        if value == "":
            env = SETTINGS[flag[2:].replace("-", "_")].env
            return f"{flag} is empty (is {env} set to ''?): give a key, or leave it unset"
    if is_loopback(config.host) or config.auth_configured or config.allow_unauthenticated:
        return None
    return (
        f"--host {config.host} listens beyond this machine and no API key is set: anyone who reaches the "
        "port could use the model, the sandbox and every stored response. Set --api-key "
        "(VLLM_RESPONSES_API_KEY), or --allow-unauthenticated (VLLM_RESPONSES_ALLOW_UNAUTHENTICATED=1) when "
        "clients are authenticated in front of this server."
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
        print(f"vllm-responses: db upgrade failed: {type(exc).__name__}: {masked(str(exc))}", file=sys.stderr)
        return 2
    print(f"schema version {before} -> {after}" if before != after else f"schema version {after}: up to date")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ns = build_parser(with_engine_args=argv[:1] != ["db"]).parse_args(argv)  # `serve` or `db upgrade`
    if ns.command == "db":
        return _db_upgrade(ns.db)
    refusal = exposure_refusal(Config(**_ours(ns)))
    if refusal is not None:
        print(f"vllm-responses: {refusal}", file=sys.stderr)
        return 2
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

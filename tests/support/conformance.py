"""A runtime check that a class implements a (not runtime-checkable) Protocol: members, kinds, signatures."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["assert_implements"]


def _kind(member: Any) -> str:
    if isinstance(member, property):
        return "property"
    if inspect.iscoroutinefunction(member):
        return "async def"
    return "def"  # a plain method, or one returning an async iterator (an `async def` with `yield` included)


def _params(member: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(member).parameters.values()]


def assert_implements(cls: type, protocol: type) -> None:
    """Fail unless `cls` has every public member of `protocol`, each of the same kind (property, method,
    coroutine method) and, for methods, with the same parameters. Stricter than `isinstance` against a
    runtime-checkable Protocol, which only checks that the names exist."""
    members = {n for n in vars(protocol) if not n.startswith("_")} | set(
        getattr(protocol, "__annotations__", {})
    )
    assert members, f"{protocol.__name__} has no public members"
    for name in sorted(members):
        want = inspect.getattr_static(protocol, name)
        got = inspect.getattr_static(cls, name, None)
        assert got is not None, f"{cls.__name__} lacks {protocol.__name__}.{name}"
        assert _kind(got) == _kind(want), f"{cls.__name__}.{name}: {_kind(got)}, expected {_kind(want)}"
        if _kind(want) != "property":
            assert _params(got) == _params(want), f"{cls.__name__}.{name}: {_params(got)} != {_params(want)}"

"""Which hosts and origins the server answers: loopback addresses, `Host` header values and `Origin`s."""

from __future__ import annotations

from interpreter_service.service.auth import (
    is_loopback,  # the sandbox service's own start-up check uses it too
)
from vllm_responses.config import Config

__all__ = [
    "ANY",
    "LOOPBACK_NAMES",
    "HostPattern",
    "allowed_hosts",
    "cors_origins",
    "host_allowed",
    "is_loopback",
    "origin_allowed",
    "split_host",
    "uses_default_hosts",
]

ANY = "*"
# The names a loopback client uses; the default `--allowed-hosts` (with `--host` when it is one address).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# `--host` values that bind every address: no one name of the server's.
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}

# (host, port): a port of None matches any port.
HostPattern = tuple[str, int | None]


def split_host(value: str) -> HostPattern | None:
    """`example.com:8000` -> ("example.com", 8000); `[::1]:80` -> ("::1", 80); `::1` -> ("::1", None).
    Names are lower-cased, without a trailing dot; None when `value` is not a host."""
    value = value.strip().lower()
    port: str | None = None
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name = value  # a bare IPv6 address has no port
    name = name.rstrip(".")
    if not name or (port is not None and not port.isdigit()):
        return None
    return name, int(port) if port is not None else None


def uses_default_hosts(config: Config) -> bool:
    """Whether `--allowed-hosts` is left at its default (which names no DNS name of the server's)."""
    return not config.allowed_hosts


def allowed_hosts(config: Config) -> frozenset[HostPattern] | None:
    """The `Host` values served: `--allowed-hosts`, else the loopback names and `--host` when it is one
    address. None: any (`*`)."""
    entries: tuple[str, ...] = config.allowed_hosts
    if ANY in entries:
        return None
    if not entries:
        specific = () if config.host.strip() in _WILDCARDS else (config.host,)
        entries = (*LOOPBACK_NAMES, *specific)
    patterns = (split_host(entry) for entry in entries)
    return frozenset(p for p in patterns if p is not None)


def host_allowed(host: str, allowed: frozenset[HostPattern] | None) -> bool:
    """Whether a `Host` header's value matches an allowed host (its port too, where the pattern has one)."""
    if allowed is None:
        return True
    given = split_host(host)
    if given is None:
        return False
    name, port = given
    return (name, None) in allowed or (port is not None and (name, port) in allowed)


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """`https://app.example.com` -> ("https", "app.example.com", 443); None when it is not an origin."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS or not rest or "/" in rest.rstrip("/"):
        return None
    parts = split_host(rest.rstrip("/"))
    if parts is None:
        return None
    name, port = parts
    return scheme, name, port if port is not None else _DEFAULT_PORTS[scheme]


def cors_origins(allowed: tuple[str, ...]) -> list[str]:
    """`--allowed-origins` as browsers write an `Origin` (`https://app.example.com`, the port only when not
    the scheme's default), for the CORS answers; `*` as it is."""
    written = []
    for entry in allowed:
        parts = _origin_parts(entry)
        if entry == ANY or parts is None:
            written.append(entry)
            continue
        scheme, name, port = parts
        shown = f"[{name}]" if ":" in name else name
        written.append(f"{scheme}://{shown}" + ("" if port == _DEFAULT_PORTS[scheme] else f":{port}"))
    return written


def origin_allowed(origin: str, host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a request from `origin` may go on: the same host and port as the request's `Host` (the
    scheme is not compared: behind a TLS proxy the server does not know it), or listed in `allowed`
    (`--allowed-origins`; `*`: any). `null` (a sandboxed frame, a file, a redirect) never is."""
    parts = _origin_parts(origin)
    if parts is None:
        return False
    if ANY in allowed:
        return True
    scheme, name, port = parts
    target = split_host(host)
    if target is not None and target[0] == name:
        if (target[1] if target[1] is not None else _DEFAULT_PORTS[scheme]) == port:
            return True
    return any(_origin_parts(entry) == parts for entry in allowed)

"""Which remote URLs the server may fetch for a client: URLs normalised before the operator's allow-list judges
them, the host resolved once and its addresses checked, and the connection pinned to the checked address.

A URL is normalised (RFC 3986: scheme and host lower-cased, the default port made explicit, unreserved
percent-encodings decoded, dot segments removed, encoded ones included) and refused when it cannot be read one
way only (userinfo, a fragment, a backslash, an encoded `/` or `\\`, control characters, a numeric host that is
not a plain dotted quad). `UrlPolicy.match` judges the normal form; `UrlPolicy.pin` resolves its host once and
refuses loopback, private, link-local and other special addresses unless the operator named the host (an
explicit allow-list entry, not `*`) or allowed private networks; `pinned_transport` connects to exactly that
address, for every request (redirects too) re-checking the URL.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from vllm_responses.executors import RESOLVE, run_on

__all__ = [
    "Pinned",
    "Refused",
    "Target",
    "UrlPolicy",
    "normal_url",
    "pinned_transport",
    "refused_headers",
    "special_address",
]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
# percent-encodings that would change a path's meaning once a server decodes them: `/`, `\`, controls
_BAD_ENCODED = re.compile(r"%(2f|5c|[01][0-9a-f]|7f)", re.IGNORECASE)
# ranges that embed an IPv4 address a gateway may reach: NAT64 (its last 32 bits) and 6to4 (bits 16-48)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")


class Refused(Exception):
    """The guard refused a URL or an address (the reason is for logs, never for the client)."""


@dataclass(frozen=True)
class Target:
    """A normalised http(s) URL, in parts; `url` is the one string the client connects to."""

    scheme: str
    host: str  # lower-case name, dotted quad, or bracket-less IPv6 in its compressed form
    port: int
    path: str  # dot segments removed, starting with `/`
    query: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{host}:{self.port}{self.path}{query}"

    def under(self, prefix: Target) -> bool:
        """Whether this URL is on `prefix`'s scheme, host and port and under its path (on segment boundaries)."""
        if (self.scheme, self.host, self.port) != (prefix.scheme, prefix.host, prefix.port):
            return False
        base = prefix.path.rstrip("/")
        return not base or self.path == base or self.path.startswith(base + "/")


def _host(raw: str) -> str:
    """The URL's host in its one canonical form, or `Refused`."""
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise Refused("an unterminated IPv6 literal")
        try:
            return ipaddress.IPv6Address(raw[1:-1]).compressed
        except ValueError:
            raise Refused("a bad IPv6 literal") from None
    host = raw.lower()
    if host.endswith("."):
        host = host[:-1]
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(host):
        raise Refused("a host that is not an ASCII name or an IP literal")
    if host.rsplit(".", 1)[-1].isdigit() or _looks_numeric(host):
        raise Refused("a numeric host that is not a plain dotted quad")
    return host


def _looks_numeric(host: str) -> bool:
    """Whether `host` is an IPv4 address the C resolver reads in another form (`127.1`, `0x7f.1`, `2130706433`)."""
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


def _decode_unreserved(text: str) -> str:
    """`text` with percent-encoded unreserved characters decoded and the other encodings' hex upper-cased."""

    def one(m: re.Match[str]) -> str:
        char = chr(int(m.group(1), 16))
        return char if char in _UNRESERVED_CHARS else "%" + m.group(1).upper()

    return _UNRESERVED.sub(one, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 (with `%2E` already decoded to `.`)."""
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments[1:], 1):
        last = i == len(segments) - 1
        if seg == "..":
            if len(out) > 0:
                out.pop()
            if last:
                out.append("")
        elif seg == ".":
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def normal_url(url: str) -> Target:
    """`url` normalised (module docstring), or `Refused` for what is not an unambiguous http(s) URL."""
    if _BAD_CHARS.search(url) or "#" in url:
        raise Refused("a control character, space, backslash or fragment")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise Refused("not an http(s) URL")
    if "@" in parts.netloc or "%" in parts.netloc:
        raise Refused("userinfo or a percent-encoding in the authority")
    host, port_text = parts.netloc, ""
    if m := re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(\d*))?", parts.netloc):
        host, port_text = m.group(1), m.group(2) or ""
    else:
        raise Refused("a bad authority")
    port = int(port_text) if port_text else _DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        raise Refused("a bad port")
    if _BAD_ENCODED.search(parts.path):
        raise Refused("an encoded slash, backslash or control character in the path")
    path = _remove_dot_segments(_decode_unreserved(parts.path or "/"))
    return Target(scheme, _host(host), port, path, _decode_unreserved(parts.query))


def special_address(address: str) -> bool:
    """Whether `address` is not a public unicast one: loopback, private (RFC 1918, ULA), link-local (cloud
    metadata included), CGNAT, unspecified, multicast, reserved, documentation, or an IPv6 form that maps or
    embeds one of those (IPv4-mapped, NAT64, 6to4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is None and ip in _SIX_TO_FOUR:
            embedded = ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)
        if embedded is not None and special_address(str(embedded)):
            return True
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified


@dataclass(frozen=True)
class Pinned:
    """A checked URL and the one address its connections go to."""

    target: Target
    address: str


@dataclass(frozen=True)
class UrlPolicy:
    """The operator's rule for URLs that clients name: `allowed` prefixes (`*`: any http(s) URL) and whether
    hosts that resolve to special addresses (`special_address`) may be reached through `*`."""

    allowed: tuple[str, ...] = ()
    private_networks: bool = False

    def match(self, url: str) -> tuple[Target, bool]:
        """`url` normalised and whether an explicit entry (not `*`) allows it, or `Refused`."""
        target = normal_url(url)
        star = False
        for entry in self.allowed:
            if entry.strip() == "*":
                star = True
                continue
            try:
                if target.under(normal_url(entry.strip())):
                    return target, True
            except Refused:
                continue
        if not star:
            raise Refused("not under an allowed prefix")
        if not self.private_networks and _literal(target.host) and special_address(target.host):
            raise Refused("a special address through '*'")
        return target, False

    async def pin(self, url: str) -> Pinned:
        """`url` matched, its host resolved once and every address checked: the address to connect to."""
        target, explicit = self.match(url)
        try:  # the socket module's resolver in a thread (an event loop such as uvloop may have its own)
            infos = await run_on(
                RESOLVE, socket.getaddrinfo, target.host, target.port, type=socket.SOCK_STREAM
            )
        except OSError:
            raise Refused("the host does not resolve") from None
        addresses = [str(info[4][0]) for info in infos]
        if not addresses:
            raise Refused("the host does not resolve")
        if not (explicit or self.private_networks) and any(special_address(a) for a in addresses):
            raise Refused("the host resolves to a special address")
        return Pinned(target, addresses[0])


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def pinned_transport(pinned: Pinned, answered: Callable[[], None] | None = None) -> Any:
    """An httpx2 transport that sends every request to `pinned.address` (the Host header and TLS name stay
    the URL's host) and refuses (`Refused`) a request whose normalised URL leaves the pinned scheme, host and
    port (a redirect the MCP SDK follows, an SSE endpoint the server names: the server's own choices, so its
    path is not held to the allow-list's prefix); `answered` is called on each response."""
    import httpcore2
    import httpx2

    class _Backend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore2.AnyIOBackend()

        async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            if (host.strip("[]").lower().rstrip("."), port) != (pinned.target.host, pinned.target.port):
                raise Refused("a connection to another host than the pinned one")
            return await self.inner.connect_tcp(pinned.address, port, *args, **kwargs)

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            raise Refused("a unix socket")

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    class _Transport(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            target = normal_url(str(request.url))
            if (target.scheme, target.host, target.port) != (
                pinned.target.scheme,
                pinned.target.host,
                pinned.target.port,
            ):
                raise Refused("a request to another origin than the pinned one")
            response = await super().handle_async_request(request)
            if answered is not None:
                answered()
            return response

    transport = _Transport(trust_env=False)
    transport._pool._network_backend = _Backend()  # httpx2 takes no backend of its own: the pool's is set
    return transport


def refused_headers(names: Iterable[str]) -> list[str]:
    """The header names among `names` a client may not set on a request to a remote server: `Host` and the
    hop-by-hop ones (they would change where or how the request goes, not what it says)."""
    return [n for n in names if n.lower() in _HOP_BY_HOP or n.lower().startswith("proxy-")]


_HOP_BY_HOP = frozenset(
    {"host", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "content-length"}
)

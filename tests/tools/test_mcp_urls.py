"""The operator's MCP URL allow-list (`--mcp-allowed-urls`) and the approval / allowed-tools rules of an mcp tool."""

from __future__ import annotations

import pytest

from vllm_responses.protocol.mcp_items import McpTool
from vllm_responses.tools.net_guard import Refused, UrlPolicy

ALLOWED = ("http://10.0.0.5:9000/mcp", "https://tools.example")


def url_allowed(url: str, allowed: tuple[str, ...], private_networks: bool = False) -> bool:
    """Whether the operator's policy (`UrlPolicy.match`, what requests are checked with) lets `url` through."""
    try:
        UrlPolicy(allowed, private_networks).match(url)
    except Refused:
        return False
    return True


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://10.0.0.5:9000/mcp", True),
        ("http://10.0.0.5:9000/mcp/", True),
        ("http://10.0.0.5:9000/mcp/sub", True),
        ("http://10.0.0.5:9000/mcpx", False),  # a path prefix, not a string prefix
        ("http://10.0.0.5:9001/mcp", False),  # another port
        ("https://10.0.0.5:9000/mcp", False),  # another scheme
        ("http://10.0.0.5:9000@evil.example/mcp", False),  # userinfo trick: the host is evil.example
        ("https://tools.example/any/path", True),
        ("https://TOOLS.example/x", True),
        ("https://tools.example.evil.org/", False),
        ("ftp://tools.example/", False),
        ("file:///etc/passwd", False),
        # normalised before matching: dot segments (encoded ones too) resolved, defaults made explicit
        ("http://10.0.0.5:9000/mcp/../admin", False),
        ("http://10.0.0.5:9000/mcp/%2e%2e/admin", False),
        ("http://10.0.0.5:9000/mcp/.%2E/admin", False),
        ("http://10.0.0.5:9000/mcp/x/../y", True),
        ("http://10.0.0.5:9000/x/../mcp", True),
        ("http://10.0.0.5:9000/mcp%2F..%2Fadmin", False),  # an encoded slash is refused, not guessed at
        ("http://10.0.0.5:9000\\@evil.example/mcp", False),
        ("http://10.0.0.5:9000/mcp#frag", False),
        ("http://user@10.0.0.5:9000/mcp", False),
        ("HTTPS://TOOLS.EXAMPLE.:443/x", True),  # scheme, host case, trailing dot, default port
        ("https://tools.example:8443/x", False),
        ("http://10.0.0.5:9000/%6Dcp", True),  # an encoded unreserved character is the character
        ("http://[::ffff:10.0.0.5]:9000/mcp", False),  # another host, though it maps to the same address
        ("http://0x0a.0.0.5:9000/mcp", False),  # a numeric host that is not a dotted quad
    ],
)
def test_url_allowed(url: str, ok: bool) -> None:
    assert url_allowed(url, ALLOWED) is ok


def test_the_star_allows_public_http_urls_and_nothing_allows_none() -> None:
    assert url_allowed("http://tools.example/latest", ("*",))
    for special in (
        "169.254.169.254",
        "127.0.0.1",
        "10.1.2.3",
        "[::1]",
        "[::ffff:169.254.169.254]",
        "[fd00::1]",
    ):
        assert not url_allowed(f"http://{special}/latest", ("*",))
        assert url_allowed(f"http://{special}/latest", ("*",), private_networks=True)
    assert url_allowed("http://127.0.0.1:5/mcp", ("*", "http://127.0.0.1:5/mcp"))  # named by the operator
    assert not url_allowed("gopher://x/", ("*",))
    assert not url_allowed("http://127.0.0.1/mcp", ())


def tool(**extra: object) -> McpTool:
    return McpTool.model_validate({"type": "mcp", "server_label": "s", "server_url": "http://x/", **extra})


def test_approval_rules() -> None:
    assert tool().needs_approval("add", read_only=True)  # absent: always, as OpenAI's default
    assert not tool(require_approval="never").needs_approval("add", read_only=False)
    mixed = tool(require_approval={"never": {"tool_names": ["add"]}, "always": {"tool_names": ["rm"]}})
    assert not mixed.needs_approval("add", read_only=False)
    assert mixed.needs_approval("rm", read_only=False) and mixed.needs_approval("other", read_only=False)
    read_only = tool(require_approval={"never": {"read_only": True}})
    assert not read_only.needs_approval("get", read_only=True) and read_only.needs_approval(
        "set", read_only=False
    )


def test_allowed_tools_rules() -> None:
    assert tool().allows("x", read_only=False)
    assert tool(allowed_tools=["a"]).allows("a", read_only=False)
    assert not tool(allowed_tools=["a"]).allows("b", read_only=True)
    both = tool(allowed_tools={"tool_names": ["a", "b"], "read_only": True})
    assert both.allows("a", read_only=True) and not both.allows("b", read_only=False)
    assert tool(allowed_tools={}).allows("x", read_only=False)  # an empty filter filters nothing


def test_authorization_becomes_a_bearer_header() -> None:
    headers = tool(headers={"X-A": "1"}, authorization="tok").request_headers()
    assert headers == {"X-A": "1", "Authorization": "Bearer tok"}

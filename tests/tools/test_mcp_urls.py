"""The operator's MCP URL allow-list (`--mcp-allowed-urls`) and the approval / allowed-tools rules of an mcp tool."""

from __future__ import annotations

import pytest

from vllm_responses.protocol.mcp_items import McpTool
from vllm_responses.tools.mcp import url_allowed

ALLOWED = ("http://10.0.0.5:9000/mcp", "https://tools.example")


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
    ],
)
def test_url_allowed(url: str, ok: bool) -> None:
    assert url_allowed(url, ALLOWED) is ok


def test_the_star_allows_any_http_url_and_nothing_allows_none() -> None:
    assert url_allowed("http://169.254.169.254/latest", ("*",))
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

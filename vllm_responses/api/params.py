"""A request's body and query parameters.

The body as JSON: sent as `application/json` (else a 415), valid UTF-8, nested at most `MAX_JSON_DEPTH` deep,
every string valid Unicode; a 400 naming `body` (or the string's place) otherwise, never a 500. The query:
`include` (`include_params`), and cursor pages (`{"object": "list", "data", "first_id", "last_id",
"has_more"}`) from `order`, `limit` and `after`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request

from vllm_responses.protocol.errors import InvalidRequest, UnsupportedMediaType
from vllm_responses.protocol.requests import check_includes

__all__ = [
    "MAX_JSON_DEPTH",
    "cursor_page",
    "include_params",
    "is_json",
    "json_body",
    "page_params",
    "parse_json",
]

# Arrays and objects nested deeper than this are refused. A real create body is a dozen levels deep; the
# deepest legitimate part, a function tool's JSON schema, stays far below it (OpenAI's structured outputs
# allow 10 levels of schema nesting, about 20 of JSON). Python's parser would itself fail near 1000 levels
# with a RecursionError, and the validation and storage behind it recurse too.
MAX_JSON_DEPTH = 128

# A `\uD800`-`\uDFFF` escape: JSON may spell a surrogate half, which is only text as part of a pair.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


async def json_body(request: Request) -> Any:
    """The request's body as parsed JSON (any JSON value: the caller checks its shape), if it is sent as
    JSON (`is_json`), else a 415 before it is read: a web page's form or text/plain POST, which needs no
    CORS preflight, is never taken for JSON. The body's size is bounded while it is read
    (`middleware.BodyLimitMiddleware`)."""
    given = request.headers.get("content-type")
    if not is_json(given):
        shown = f"'{given}'" if given else "none"
        raise UnsupportedMediaType(
            f"The request body must be JSON sent with 'Content-Type: application/json' (got {shown}).",
            code="unsupported_media_type",
        )
    return parse_json(await request.body())


def is_json(content_type: str | None) -> bool:
    """Whether a `Content-Type` names JSON: `application/json` or `application/<x>+json`, parameters
    (`; charset=utf-8`) allowed."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    return mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json"))


def parse_json(raw: bytes | str, param: str | None = "body") -> Any:
    """`raw` parsed as JSON, or `InvalidRequest`: code `invalid_json` naming `param` (the body; None for a
    WebSocket message), or `invalid_value` naming the place of a string that is not valid Unicode."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(
                f"{_noun(param)} is not valid UTF-8 (byte {exc.start}).", param=param, code="invalid_json"
            ) from None
    try:
        value = json.loads(raw)
    except RecursionError:
        raise _too_deep(param) from None
    except ValueError:
        raise InvalidRequest(f"{_noun(param)} is not valid JSON.", param=param, code="invalid_json") from None
    if raw.count("[") + raw.count("{") > MAX_JSON_DEPTH and _depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep(param)
    if _SURROGATE_ESCAPE.search(raw):
        _check_unicode(value)
    return value


def _noun(param: str | None) -> str:
    return "The request body" if param == "body" else "The message"


def _too_deep(param: str | None) -> InvalidRequest:
    return InvalidRequest(
        f"{_noun(param)} nests arrays and objects more than {MAX_JSON_DEPTH} levels deep.",
        param=param,
        code="invalid_json",
    )


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep in `value` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _check_unicode(value: Any) -> None:
    """Refuse a string (or object key) holding a lone surrogate, naming its place (`input[0].content`)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            _refuse_surrogate(node, path, "a string")
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node))
        elif isinstance(node, dict):
            for key, child in node.items():
                _refuse_surrogate(key, path, "an object key")
                stack.append((child, f"{path}.{key}" if path else key))


def _refuse_surrogate(text: str, path: str, what: str) -> None:
    bad = _SURROGATE.search(text)
    if bad:
        place = path or "body"
        raise InvalidRequest(
            f"Invalid value for '{place}': {what} holds a lone surrogate (\\u{ord(bad.group()):04x}), "
            "which is not valid Unicode.",
            param=place,
            code="invalid_value",
        )


# --- query parameters ---------------------------------------------------------------------------------


def include_params(query: QueryParams) -> list[str]:
    """The query's `include` values (`include[]=` as the SDK sends them, and `include=`), checked."""
    include = query.getlist("include[]") + query.getlist("include")
    check_includes(include)
    return include


def page_params(query: Mapping[str, str]) -> tuple[str, int, str | None]:
    """`order` (default "desc"), `limit` and `after` of a list request; bad values are a 400 naming the
    parameter."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'.", param="order")
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        raise InvalidRequest("limit must be an integer.", param="limit") from None
    if not 1 <= limit <= 100:
        raise InvalidRequest("limit must be between 1 and 100.", param="limit")
    return order, limit, query.get("after") or None


def cursor_page(items: Sequence[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of `items` (given oldest first) as the SDK's cursor page; bad parameters are a 400."""
    order, limit, after = page_params(query)
    ordered = list(items) if order == "asc" else list(reversed(items))
    if after:
        ids = [it["id"] for it in ordered]
        if after not in ids:
            raise InvalidRequest(f"No item with id {after!r} in this list.", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(ordered) > limit,
    }

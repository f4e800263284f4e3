"""`PdfBudget`: what one request's PDFs may cost to read (pages, decoded content bytes), charged before their
text is extracted.

A page's cost is the decoded size of every content stream it names, and of every form XObject its resources
name (and theirs, nested), counted for each page that names them: a stream that many pages share is parsed
once per page by a text extractor, so it is paid once per page too. Each distinct stream is decoded once to
size it (pypdf bounds a single stream's decoded size). Past the budget, `OverBudget` says which limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pypdf import PageObject

__all__ = ["OverBudget", "PdfBudget", "page_content_bytes"]

# Form XObjects nested deeper than this are counted at this depth's cost only (a reader draws them all the same).
_MAX_FORM_DEPTH = 8


class OverBudget(Exception):
    """A request's PDFs past its budget; the message says which limit (it is shown to the client)."""


@dataclass
class PdfBudget:
    """What is left of one request's budget: pages read, and decoded content bytes of those pages."""

    pages: int
    content_bytes: int

    def charge(self, pages: int, content_bytes: int) -> None:
        """Take `pages` and `content_bytes` off what is left, or `OverBudget` (nothing taken)."""
        if pages > self.pages:
            raise OverBudget(
                f"the request's PDFs have more pages than this server reads for one request "
                f"({self.pages} left; --input-file-max-request-pages)"
            )
        if content_bytes > self.content_bytes:
            raise OverBudget(
                f"the request's PDFs hold more page content than this server reads for one request "
                f"({self.content_bytes} bytes left; --input-file-max-content-bytes; a content stream is counted "
                "once for every page that names it)"
            )
        self.pages -= pages
        self.content_bytes -= content_bytes


def page_content_bytes(page: PageObject, sizes: dict[int, int]) -> int:
    """The decoded bytes of the content streams and form XObjects `page` names (`sizes`: the decoded size by
    object id, filled as streams are first sized)."""
    total = 0
    contents = page.get("/Contents")
    for stream in _listed(contents):
        total += _size(stream, sizes)
    return total + _forms_bytes(page.get("/Resources"), sizes, set(), 0)


def _forms_bytes(resources: Any, sizes: dict[int, int], seen: set[int], depth: int) -> int:
    """The decoded bytes of the form XObjects `resources` names, nested forms included (each once per page)."""
    resources = _resolved(resources)
    xobjects = _resolved(resources.get("/XObject")) if isinstance(resources, dict) else None
    if not isinstance(xobjects, dict) or depth >= _MAX_FORM_DEPTH:
        return 0
    total = 0
    for ref in xobjects.values():
        key = _key(ref)
        form = _resolved(ref)
        if key in seen or not isinstance(form, dict) or form.get("/Subtype") != "/Form":
            continue
        seen.add(key)
        total += _size(ref, sizes) + _forms_bytes(form.get("/Resources"), sizes, seen, depth + 1)
    return total


def _listed(contents: Any) -> list[Any]:
    """A page's /Contents as a list of (references to) streams."""
    if contents is None:
        return []
    resolved = _resolved(contents)
    return list(resolved) if isinstance(resolved, list) else [contents]


def _size(ref: Any, sizes: dict[int, int]) -> int:
    """The decoded size of the stream `ref` names (decoded once per object id)."""
    key = _key(ref)
    if key not in sizes:
        stream = _resolved(ref)
        sizes[key] = len(stream.get_data()) if hasattr(stream, "get_data") else 0
    return sizes[key]


def _key(ref: Any) -> int:
    """An object's identity: its object number when it is referenced, else the Python object's id."""
    number = getattr(ref, "idnum", None)
    return int(number) if number is not None else -id(ref)


def _resolved(value: Any) -> Any:
    return value.get_object() if hasattr(value, "get_object") else value

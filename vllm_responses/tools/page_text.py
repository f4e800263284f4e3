"""A fetched web page's readable text: HTML through the standard library's parser (scripts, styles and other
elements that hold no prose dropped; the title, headings, paragraphs, list items, table cells and links'
text kept, one block a line), plain text as it is; any other content type is not read (`NotText`)."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from html.parser import HTMLParser

__all__ = ["NotText", "PageText", "page_text"]

# Elements whose content is not the page's prose.
_SKIPPED = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select"}
)
# Elements that start and end a line of their own.
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "div", "dl", "dt",
        "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
        "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "thead", "tfoot", "tr",
        "ul",
    }
)  # fmt: skip
_CELLS = frozenset({"td", "th"})
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "wbr", "area", "base", "col", "source"})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACES = re.compile(r"[^\S\n]+")


class NotText(Exception):
    """A page whose content type is neither HTML nor plain text (`media_type`: the type it was sent as)."""

    def __init__(self, media_type: str) -> None:
        super().__init__(media_type)
        self.media_type = media_type


@dataclass(frozen=True)
class PageText:
    """A page as the model reads it: its title ("" when it has none) and its text, blocks one a line."""

    title: str
    text: str


def page_text(body: bytes, content_type: str | None) -> PageText:
    """The readable text of a page sent as `content_type` (its `Content-Type` header; without one, a body
    that opens like HTML is read as HTML, any other as plain text), decoded by its charset (the header's,
    else an HTML `<meta charset>`, else UTF-8; bytes that do not decode are replaced); raises `NotText`."""
    media, charset = _media(content_type)
    if media is None:
        media = "text/html" if body.lstrip()[:1] == b"<" else "text/plain"
    if media not in _HTML_TYPES and media not in _TEXT_TYPES:
        raise NotText(media)
    if charset is None and media in _HTML_TYPES and (m := _META_CHARSET.search(body[:2048])):
        charset = _known(m.group(1).decode("ascii"))
    text = body.decode(charset or "utf-8", errors="replace")
    if media in _TEXT_TYPES:
        return PageText("", _tidy(text.replace("\r\n", "\n"), blank_lines=True))
    parser = _Reader()
    parser.feed(text)
    parser.close()
    return PageText(" ".join("".join(parser.title).split()), _tidy("".join(parser.out), blank_lines=False))


def _media(content_type: str | None) -> tuple[str | None, str | None]:
    """A Content-Type's media type (lower case) and charset (a codec Python knows, else None)."""
    if not content_type or not content_type.strip():
        return None, None
    media, *params = content_type.split(";")
    charset = None
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = _known(value.strip().strip("\"'"))
    return media.strip().lower(), charset


def _known(charset: str) -> str | None:
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return None


def _tidy(text: str, *, blank_lines: bool) -> str:
    """Spaces within lines collapsed, lines stripped; runs of blank lines made one (`blank_lines`), or none
    kept (an HTML page's blocks, a line each)."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    if not blank_lines:
        return "\n".join(line for line in lines if line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


class _Reader(HTMLParser):
    """Collects an HTML page's title and its text, a line per block (a heading marked `#`, a list item `-`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title: list[str] = []
        self._skipping: list[str] = []  # the open skipped elements, innermost last
        self._in_title = False
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping:
            if tag in _SKIPPED:
                self._skipping.append(tag)
            return
        if tag in _SKIPPED:
            self._skipping.append(tag)
        elif tag == "title":
            self._in_title = True
        elif tag == "br":
            self.out.append("\n")
        elif tag in _BLOCKS:
            self.out.append("\n")
            if tag[0] == "h" and tag[1:].isdigit():
                self.out.append("#" * int(tag[1:]) + " ")
            elif tag == "li":
                self.out.append("- ")
            elif tag == "pre":
                self._pre += 1
        elif tag in _CELLS:
            self.out.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag in self._skipping:
                while self._skipping.pop() != tag:
                    pass
            return
        if tag == "title":
            self._in_title = False
        elif tag in _BLOCKS:
            self.out.append("\n")
            if tag == "pre":
                self._pre = max(0, self._pre - 1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:  # `<div/>`: a start tag the parser would not see closed
            return
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._in_title:
            self.title.append(data)
        elif self._pre:
            self.out.append(data)
        else:
            self.out.append(_spaced(data))


def _spaced(data: str) -> str:
    """Text outside `<pre>` with its whitespace runs made one space (kept at its ends: words stay apart)."""
    inner = " ".join(data.split())
    return (" " if data[:1].isspace() else "") + inner + (" " if data[-1:].isspace() else "")

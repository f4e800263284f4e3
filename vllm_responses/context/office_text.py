"""Office documents' text: a DOCX's body and a PPTX's slides, read from the zip's XML parts with defusedxml.

Pure and synchronous; run only in an extraction worker process (context/extraction.py), under its CPU, memory and
time limits. Before any part is read, the zip's directory is checked: at most `MAX_MEMBERS` members, and each part
read at most `MAX_PART_BYTES` uncompressed, `MAX_READ_BYTES` in all, by the sizes the directory declares
(`zipfile` stops a member at its declared size, so a zip bomb cannot inflate past them). Only the parts that
hold the text are read (never images or embedded objects), streamed through `iterparse` and dropped as they
are read; a DTD or an entity declaration is refused (OOXML has none), so no entity can expand. Reading stops once
`max_chars` of text are in hand. What is not a readable document is `OfficeError`, whose message says why.

DOCX: the main document's paragraphs in order, one a line (text boxes and content controls included, a table's
row as its cells joined by ` | `; deleted revisions, field codes, headers, footers and notes left out). PPTX: each
slide in the presentation's order under a `--- slide N of M ---` line, its paragraphs one a line (speaker notes
left out).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from posixpath import dirname, join, normpath
from typing import IO, Any

from defusedxml.ElementTree import iterparse

__all__ = ["MAX_MEMBERS", "MAX_PART_BYTES", "MAX_READ_BYTES", "OfficeError", "docx_text", "pptx_slides"]

MAX_MEMBERS = 10_000
MAX_PART_BYTES = 64 << 20
MAX_READ_BYTES = 256 << 20

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_OFFICE_DOCUMENT = "/officeDocument"


class OfficeError(Exception):
    """A file that is not a readable DOCX or PPTX; the message says why (it is shown to the client)."""


class _Package:
    """The zip of an OOXML document, its directory checked, its parts read within the bounds."""

    def __init__(self, data: bytes, what: str) -> None:
        self.what = what
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, ValueError, OSError):
            raise OfficeError(f"is not a readable {what} (not a zip archive)") from None
        if len(self.zip.infolist()) > MAX_MEMBERS:
            raise OfficeError(f"is not read: it has more than {MAX_MEMBERS} parts")
        self.read_bytes = 0

    def open(self, name: str) -> IO[bytes]:
        """The part `name`, streamed; `OfficeError` when it is missing or past the bounds."""
        try:
            info = self.zip.getinfo(name)
        except KeyError:
            raise OfficeError(f"is not a readable {self.what} (its part {name} is missing)") from None
        if info.file_size > MAX_PART_BYTES or self.read_bytes + info.file_size > MAX_READ_BYTES:
            raise OfficeError(
                f"is not read: its part {name} is {info.file_size} bytes uncompressed, past this server's bound "
                f"({MAX_PART_BYTES} bytes a part, {MAX_READ_BYTES} in all)"
            )
        self.read_bytes += info.file_size
        return self.zip.open(info)

    def relationships(self, part: str) -> list[tuple[str, str, str]]:
        """The relationships of `part` ("" for the package's own): (id, type, the target part's name) each."""
        rels = join(dirname(part), "_rels", part.rsplit("/", 1)[-1] + ".rels") if part else "_rels/.rels"
        found: list[tuple[str, str, str]] = []
        with self.open(rels) as stream:
            for _, elem in iterparse(stream, forbid_dtd=True):
                if elem.tag == _REL and elem.get("TargetMode") != "External":
                    target = elem.get("Target", "")
                    name = target.lstrip("/") if target.startswith("/") else join(dirname(part), target)
                    found.append((elem.get("Id", ""), elem.get("Type", ""), normpath(name)))
        return found

    def main_part(self) -> str:
        """The document's main part, as the package's relationships name it."""
        for _, kind, target in self.relationships(""):
            if kind.endswith(_OFFICE_DOCUMENT):
                return target
        raise OfficeError(f"is not a readable {self.what} (it names no main document)")


def _events(stream: IO[bytes]) -> Iterator[tuple[str, Any]]:
    """The part's start and end events, each element dropped once its parent has ended (bounded memory)."""
    stack: list[Any] = []
    for event, elem in iterparse(stream, events=("start", "end"), forbid_dtd=True):
        if event == "start":
            stack.append(elem)
        else:
            stack.pop()
        yield event, elem
        if event == "end" and stack:
            stack[-1].remove(elem)


def _lines(stream: IO[bytes], ns: str, max_chars: int) -> list[str]:
    """Paragraphs (`p`: the text of its `t`, `tab` and `br`) of one part in namespace `ns`, one a line (a text box's
    before the paragraph that anchors it); a table row's cells joined by ` | `. Skipped: paragraph and run
    properties (tab stops, no text) and what lies in an `mc:Fallback` (a copy of its `mc:Choice`)."""
    lines: list[str] = []
    paragraphs: list[list[str]] = []  # the pieces of each open paragraph
    rows: list[list[str]] = []  # the cells of each open row (tables nest)
    cells: list[list[str]] = []  # the paragraphs of each open cell
    skipped = (_FALLBACK, ns + "pPr", ns + "rPr")
    pieces = {ns + "tab": "\t", ns + "br": "\n", ns + "cr": "\n"}
    skipping = chars = 0
    for event, elem in _events(stream):
        tag = elem.tag
        if tag in skipped:
            skipping += 1 if event == "start" else -1
        if skipping or tag in skipped:
            continue
        if event == "start":
            opened = {ns + "p": paragraphs, ns + "tr": rows, ns + "tc": cells}.get(tag)
            if opened is not None:
                opened.append([])
        elif tag == ns + "t" and paragraphs:
            paragraphs[-1].append(elem.text or "")
        elif tag in pieces and paragraphs:
            paragraphs[-1].append(pieces[tag])
        elif tag == ns + "p" and paragraphs:
            text = "".join(paragraphs.pop()).strip()
            (cells[-1] if cells else lines).append(text)
            chars += len(text)
            if chars > max_chars:  # cut there anyway: nothing further is read
                break
        elif tag == ns + "tc" and cells:
            cell = " ".join(p for p in cells.pop() if p)
            if rows:
                rows[-1].append(cell)
        elif tag == ns + "tr" and rows:
            (cells[-1] if cells else lines).append(" | ".join(rows.pop()))
    return [line for line in lines if line]


def docx_text(data: bytes, max_chars: int) -> str:
    """A DOCX's text (see the module docstring); about `max_chars` at most."""
    package = _Package(data, "DOCX")
    with package.open(package.main_part()) as stream:
        return "\n".join(_lines(stream, _W, max_chars))


def pptx_slides(data: bytes, max_chars: int) -> list[str]:
    """A PPTX's slides' texts in order, each under its `--- slide N of M ---` line; slides past `max_chars` of
    text are not read."""
    package = _Package(data, "PPTX")
    main = package.main_part()
    targets = {rel_id: target for rel_id, _, target in package.relationships(main)}
    order: list[str] = []
    with package.open(main) as stream:
        for _, elem in iterparse(stream, forbid_dtd=True):
            if elem.tag == _P + "sldId" and elem.get(_R + "id") in targets:
                order.append(targets[elem.get(_R + "id", "")])
    slides: list[str] = []
    chars = 0
    for n, part in enumerate(order):
        if chars > max_chars:
            break
        with package.open(part) as stream:
            text = "\n".join(_lines(stream, _A, max_chars - chars))
        slides.append(f"--- slide {n + 1} of {len(order)} ---\n{text or '(no text on this slide)'}")
        chars += len(slides[-1]) + 1
    return slides

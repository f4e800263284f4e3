"""Files read as text for the model: a PDF's text layer page by page (pypdf), a DOCX's or PPTX's text
(context/office_text.py), a text file decoded as UTF-8.

Pure and synchronous. A PDF or an office document is parsed only in an extraction worker process
(context/extraction.py: `EXTRACTED_KINDS`), a text file in the server's file-text threads. What cannot be read as
text (images, other office formats, archives, other binaries, encrypted or broken documents, PDFs past the
request's `PdfBudget`) is `Unreadable`, whose message says why for the client. Past `FileLimits`, a file's bytes
are refused, and a PDF's pages and a file's text are cut, with a line saying so where the cut is. A file's text
comes in parts (`read_file_parts`: a PDF's pages, a presentation's slides, else one), joined by newlines.
"""

from __future__ import annotations

import io
import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from vllm_responses.context.office_text import OfficeError, docx_text, pptx_slides
from vllm_responses.context.pdf_budget import OverBudget, PdfBudget, page_content_bytes

if TYPE_CHECKING:
    from pypdf import PdfReader

__all__ = ["EXTRACTED_KINDS", "FileLimits", "Unreadable", "file_kind", "read_file_parts", "read_file_text"]

# The kinds of file parsed in an extraction worker process, never in the server's own.
EXTRACTED_KINDS = frozenset({"pdf", "docx", "pptx"})
_OFFICE_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}

# Media types outside text/* that are text, and file name suffixes of text (source code, data, markup).
_TEXT_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-javascript",
        "application/typescript",
        "application/x-sh",
        "application/x-python",
        "application/sql",
        "application/x-tex",
        "application/csv",
    }
)
_TEXT_SUFFIXES = frozenset(
    ".txt .text .md .markdown .rst .csv .tsv .json .jsonl .ndjson .xml .html .htm .css .yaml .yml .toml .ini "
    ".cfg .conf .env .log .tex .py .pyi .ipynb .js .mjs .cjs .ts .tsx .jsx .java .kt .scala .go .rs .c .h .cc "
    ".cpp .hpp .cs .rb .php .pl .swift .m .r .jl .lua .sh .bash .zsh .ps1 .bat .sql .graphql .proto .diff "
    ".patch .svg .vue .dart .hs .ex .exs .erl .clj .el .vim .tf .gradle .cmake .mk .dockerfile .srt .vtt".split()
)
_NO_TEXT_PAGE = "(no text on this page: it may be a scanned image, which this server does not read)"
_NO_TEXT_PDF = (
    "(this PDF has no text layer: its pages may be scanned images, which this server does not read; "
    "say so rather than guess its content)"
)


@dataclass(frozen=True)
class FileLimits:
    """How much of a file is read: its bytes (past them, refused), a PDF's pages and the text kept (past
    them, cut with a line saying so)."""

    max_bytes: int
    max_pages: int
    max_chars: int


class Unreadable(Exception):
    """A file that cannot be read as text; the message says why (it is shown to the client)."""


def file_kind(data: bytes, filename: str, media_type: str | None) -> str | None:
    """ "pdf", "docx", "pptx", "text", or None (none of them): by the bytes' PDF header, the media type given,
    then the name's."""
    suffix = PurePosixPath(filename.lower()).suffix
    guessed = media_type or mimetypes.guess_type(filename)[0] or ""
    guessed = guessed.split(";", 1)[0].strip().lower()
    if data.startswith(b"%PDF-") or guessed == "application/pdf" or suffix == ".pdf":
        return "pdf"
    if guessed in _OFFICE_TYPES or suffix in (".docx", ".pptx"):
        return _OFFICE_TYPES.get(guessed) or suffix[1:]
    if guessed.startswith("text/") or guessed in _TEXT_MEDIA_TYPES or guessed.endswith(("+json", "+xml")):
        return "text"
    if suffix in _TEXT_SUFFIXES or PurePosixPath(filename.lower()).name in ("makefile", "dockerfile"):
        return "text"
    return None


def read_file_text(
    data: bytes, filename: str, media_type: str | None, limits: FileLimits, budget: PdfBudget | None = None
) -> str:
    """The text of the file `filename` (of `media_type`, when its source said) within `limits`, or
    `Unreadable`; a PDF's pages are charged to `budget` first (None: no budget)."""
    return "\n".join(read_file_parts(data, filename, media_type, limits, budget))


def read_file_parts(
    data: bytes, filename: str, media_type: str | None, limits: FileLimits, budget: PdfBudget | None = None
) -> list[str]:
    """`read_file_text`'s text in its parts: a PDF's pages, a PPTX's slides (each under its line), else one."""
    if len(data) > limits.max_bytes:
        raise Unreadable(
            f"The file {filename!r} is {len(data)} bytes, past this server's limit of {limits.max_bytes} "
            "bytes per file."
        )
    kind = file_kind(data, filename, media_type)
    if kind == "pdf":
        return _pdf_pages(data, filename, limits, budget)
    if kind in ("docx", "pptx"):
        return _capped(_office_parts(data, filename, kind, limits.max_chars), limits.max_chars)
    if kind == "text":
        return _capped([_utf8_text(data, filename)], limits.max_chars)
    shown = media_type or mimetypes.guess_type(filename)[0] or "an unknown type"
    raise Unreadable(
        f"The file {filename!r} ({shown}) cannot be read: this server reads PDFs, DOCX and PPTX documents and "
        "text files (UTF-8: plain text, markdown, CSV, JSON, source code) only."
    )


def _office_parts(data: bytes, filename: str, kind: str, max_chars: int) -> list[str]:
    try:
        return [docx_text(data, max_chars)] if kind == "docx" else pptx_slides(data, max_chars)
    except OfficeError as exc:
        raise Unreadable(f"The file {filename!r} {exc}.") from None
    except MemoryError:  # the extraction worker's to answer
        raise
    except Exception as exc:  # a parser of untrusted bytes: any failure is a broken file, not ours
        raise Unreadable(
            f"The file {filename!r} is not a readable {kind.upper()} ({type(exc).__name__})."
        ) from None


def _utf8_text(data: bytes, filename: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unreadable(f"The file {filename!r} is not UTF-8 text.") from None
    if "\x00" in text:
        raise Unreadable(f"The file {filename!r} is binary, not text.")
    return text


def _capped(parts: list[str], max_chars: int) -> list[str]:
    """`parts` (joined by newlines) cut at `max_chars`, with a line saying so; the parts past the cut dropped."""
    kept: list[str] = []
    left = max_chars
    for part in parts:
        if len(part) > left:
            cut = f"\n[... the text is cut here: past this server's limit of {max_chars} characters per file]"
            if left < 0:  # the cut falls on the newline before this part
                kept[-1] += cut
            else:
                kept.append(part[:left] + cut)
            return kept
        kept.append(part)
        left -= len(part) + 1  # the newline that joins it to the next
    return kept


def _pdf_pages(data: bytes, filename: str, limits: FileLimits, budget: PdfBudget | None) -> list[str]:
    """A PDF's text page by page under `--- page N of M ---` lines, pages past the limit left out and said to be;
    the pages to read are charged to `budget` before any is."""
    from pypdf import PdfReader  # imported on first use: most requests carry no PDF

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opened(reader):
            raise Unreadable(f"The PDF {filename!r} is encrypted (password protected), so it cannot be read.")
        total = len(reader.pages)
        if budget is not None:
            _charge(reader, min(total, limits.max_pages), budget)
        pages: list[str] = []
        chars = 0
        for n in range(min(total, limits.max_pages)):
            if chars > limits.max_chars:  # the text is cut there anyway: no need to read further pages
                break
            text = (reader.pages[n].extract_text() or "").strip()
            chars += len(text)
            pages.append(f"--- page {n + 1} of {total} ---\n{text or _NO_TEXT_PAGE}")
    except OverBudget as exc:
        raise Unreadable(f"The PDF {filename!r} is not read: {exc}.") from None
    except (Unreadable, MemoryError):  # out of memory: the extraction worker's to answer
        raise
    except Exception as exc:  # a parser of untrusted bytes: any failure is a broken file, not ours
        raise Unreadable(f"The file {filename!r} is not a readable PDF ({type(exc).__name__}).") from None
    if chars == 0:
        pages.insert(0, _NO_TEXT_PDF)
    if total > limits.max_pages:
        pages.append(
            f"[pages {limits.max_pages + 1}-{total} of {total} not read: past this server's limit of "
            f"{limits.max_pages} pages per PDF]"
        )
    return _capped(pages, limits.max_chars)


def _charge(reader: PdfReader, pages: int, budget: PdfBudget) -> None:
    """The first `pages` pages of `reader` charged to `budget` (`OverBudget` past it), each content stream
    once for every page that names it."""
    sizes: dict[int, int] = {}
    content = sum(page_content_bytes(reader.pages[n], sizes) for n in range(pages))
    budget.charge(pages, content)


def _opened(reader: PdfReader) -> bool:
    """Whether an encrypted PDF opens with the empty password (one with only an owner password does)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # AES without the `cryptography` package, or a broken encryption dictionary
        return False

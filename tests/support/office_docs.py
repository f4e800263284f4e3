"""DOCX and PPTX files for the tests, written by python-docx and python-pptx (the test extra), as Word and
PowerPoint files from another producer than the reader under test."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

__all__ = ["make_docx", "make_pptx", "with_part"]


def make_docx(paragraphs: Sequence[str], table: Sequence[Sequence[str]] = ()) -> bytes:
    """A DOCX of `paragraphs`, then a table of `table`'s rows (when given)."""
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                grid.cell(r, c).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_pptx(slides: Sequence[tuple[str, str]]) -> bytes:
    """A PPTX of one title-and-content slide per (title, body)."""
    import pptx

    deck = pptx.Presentation()
    layout = deck.slide_layouts[1]
    for title, body in slides:
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def with_part(document: bytes, name: str, data: bytes) -> bytes:
    """`document` with its zip member `name` replaced by `data` (compressed)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(document)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != name:
                dst.writestr(info, src.read(info))
        dst.writestr(name, data)
    return out.getvalue()

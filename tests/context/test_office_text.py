"""DOCX and PPTX files read as text (context/office_text.py through context/file_text.py), on documents written
by python-docx and python-pptx: paragraphs, tables and slides in order; zip bombs and XML entities refused before
anything is inflated or expanded; what is not a document refused; the extraction worker reads them too."""

from __future__ import annotations

import zlib

import pytest

from tests.support.office_docs import make_docx, make_pptx, with_part
from vllm_responses.context.extraction import ExtractionLimits, ExtractionPool
from vllm_responses.context.file_text import FileLimits, Unreadable, read_file_parts, read_file_text
from vllm_responses.context.office_text import MAX_PART_BYTES
from vllm_responses.context.pdf_budget import PdfBudget

ROOMY = FileLimits(max_bytes=1 << 24, max_pages=10, max_chars=100_000)
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_a_docx_is_read_as_its_paragraphs_and_table_rows() -> None:
    data = make_docx(["Owls hunt at night.", "Barn owls hear mice."], [["bird", "hours"], ["owl", "night"]])
    text = read_file_text(data, "owls.docx", None, ROOMY)
    assert text == "Owls hunt at night.\nBarn owls hear mice.\nbird | hours\nowl | night"
    assert read_file_text(data, "upload", DOCX_TYPE, ROOMY) == text  # by its media type alone


def test_a_pptx_is_read_slide_by_slide_in_order() -> None:
    data = make_pptx([("Tides", "Rise and fall\nTwice a day"), ("Bread", "Yeast")])
    assert read_file_parts(data, "deck.pptx", None, ROOMY) == [
        "--- slide 1 of 2 ---\nTides\nRise and fall\nTwice a day",
        "--- slide 2 of 2 ---\nBread\nYeast",
    ]


def test_office_text_past_the_character_limit_is_cut_with_a_line_saying_so() -> None:
    data = make_docx(["word " * 50] * 40)
    text = read_file_text(data, "long.docx", None, FileLimits(1 << 24, 10, 300))
    assert text.startswith("word word") and text.endswith("limit of 300 characters per file]")
    assert len(text.split("\n[...", 1)[0]) == 300


def test_a_zip_bomb_is_refused_by_its_declared_size_before_it_is_inflated() -> None:
    bomb = with_part(make_docx(["x"]), "word/document.xml", b" " * (MAX_PART_BYTES + 1))
    assert len(bomb) < 1 << 20
    with pytest.raises(
        Unreadable, match="word/document.xml is 67108865 bytes uncompressed, past this server"
    ):
        read_file_text(bomb, "bomb.docx", None, ROOMY)


def test_a_part_whose_size_lies_stops_at_its_declared_size() -> None:
    good = make_docx(["short"])
    packed = bytearray(with_part(good, "word/document.xml", b" " * 5000 + b"<x/>"))
    at = packed.rindex(b"word/document.xml") - 46 + 24  # the central directory's uncompressed size
    packed[at : at + 4] = (10).to_bytes(4, "little")
    with pytest.raises(Unreadable, match="'liar.docx' is not a readable DOCX"):
        read_file_text(bytes(packed), "liar.docx", None, ROOMY)


@pytest.mark.parametrize(
    "doctype",
    [
        b'<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>',
        b'<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    ],
)
def test_xml_entities_are_refused_unexpanded(doctype: bytes) -> None:
    body = b'<?xml version="1.0"?>' + doctype + b"<d>&b;&x;</d>"
    data = with_part(make_docx(["x"]), "word/document.xml", body)
    with pytest.raises(Unreadable, match="'evil.docx' is not a readable DOCX"):
        read_file_text(data, "evil.docx", None, ROOMY)


@pytest.mark.parametrize(
    ("data", "name", "why"),
    [
        (b"not a zip at all", "fake.docx", "is not a readable DOCX \\(not a zip archive\\)"),
        (zlib.compress(b"x"), "fake.pptx", "is not a readable PPTX \\(not a zip archive\\)"),
        (
            with_part(make_docx(["x"]), "_rels/.rels", b"<Relationships/>"),
            "x.docx",
            "is not a readable DOCX \\(it names no main document\\)",
        ),
    ],
)
def test_what_is_not_a_document_is_refused_saying_why(data: bytes, name: str, why: str) -> None:
    with pytest.raises(Unreadable, match=f"'{name}' {why}"):
        read_file_text(data, name, None, ROOMY)


async def test_the_extraction_worker_reads_office_documents_in_parts() -> None:
    pool = ExtractionPool(1, ExtractionLimits(cpu_s=30, timeout_s=60, memory_bytes=1 << 30))
    try:
        deck = make_pptx([("One", "first"), ("Two", "second")])
        parts = await pool.extract_parts(deck, "d.pptx", None, ROOMY, PdfBudget(10, 1 << 30))
        assert parts == ["--- slide 1 of 2 ---\nOne\nfirst", "--- slide 2 of 2 ---\nTwo\nsecond"]
        text = await pool.extract(make_docx(["Hello"]), "h.docx", None, ROOMY, PdfBudget(10, 1 << 30))
        assert text == "Hello"
    finally:
        await pool.aclose()

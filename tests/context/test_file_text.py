"""`vllm_responses/context/file_text.py` alone: PDFs (built here) and text files read as text, within limits."""

from __future__ import annotations

import io
import zipfile

import pytest

from tests.support.pdfs import encrypted_pdf, make_pdf
from vllm_responses.context.file_text import FileLimits, Unreadable, file_kind, read_file_text

ROOMY = FileLimits(max_bytes=1 << 20, max_pages=100, max_chars=100_000)


def test_a_pdf_is_read_page_by_page_under_page_lines() -> None:
    text = read_file_text(make_pdf(["Alpha (one)", "Beta two", "Gamma three"]), "r.pdf", None, ROOMY)
    assert text == (
        "--- page 1 of 3 ---\nAlpha (one)\n--- page 2 of 3 ---\nBeta two\n--- page 3 of 3 ---\nGamma three"
    )


def test_a_pdf_is_known_by_its_bytes_whatever_its_name_or_type_says() -> None:
    pdf = make_pdf(["Inside"])
    assert file_kind(pdf, "scan.bin", "application/octet-stream") == "pdf"
    assert "Inside" in read_file_text(pdf, "scan.bin", "application/octet-stream", ROOMY)


def test_a_page_without_text_is_said_to_be_so_and_a_pdf_without_any_too() -> None:
    mixed = read_file_text(make_pdf(["Typed page", None]), "m.pdf", None, ROOMY)
    assert "--- page 2 of 2 ---\n(no text on this page: it may be a scanned image" in mixed
    assert "no text layer" not in mixed
    scanned = read_file_text(make_pdf([None, None]), "s.pdf", None, ROOMY)
    assert scanned.startswith("(this PDF has no text layer: its pages may be scanned images")
    assert "say so rather than guess" in scanned


def test_pages_past_the_limit_are_not_read_and_the_model_is_told() -> None:
    limits = FileLimits(max_bytes=1 << 20, max_pages=2, max_chars=100_000)
    text = read_file_text(make_pdf(["p1", "p2", "p3", "p4"]), "long.pdf", None, limits)
    assert "p2" in text and "p3" not in text and "p4" not in text
    assert text.endswith("[pages 3-4 of 4 not read: past this server's limit of 2 pages per PDF]")


def test_text_past_the_character_limit_is_cut_with_a_line_saying_so() -> None:
    limits = FileLimits(max_bytes=1 << 20, max_pages=100, max_chars=10)
    text = read_file_text(b"0123456789abcdef", "n.txt", None, limits)
    assert (
        text == "0123456789\n[... the text is cut here: past this server's limit of 10 characters per file]"
    )
    pdf = read_file_text(make_pdf(["x" * 40, "second page"]), "n.pdf", None, limits)
    assert pdf.startswith("--- page 1\n[... the text is cut here") and "second page" not in pdf
    assert pdf.endswith("limit of 10 characters per file]")


def test_a_file_past_the_byte_limit_is_refused_with_the_limit() -> None:
    limits = FileLimits(max_bytes=8, max_pages=100, max_chars=100)
    with pytest.raises(Unreadable, match=r"'big.txt' is 9 bytes, past this server's limit of 8 bytes"):
        read_file_text(b"123456789", "big.txt", None, limits)


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("notes.md", None),
        ("data.csv", None),
        ("conf.json", None),
        ("main.py", None),
        ("Makefile", None),
        ("anything", "text/plain"),
        ("anything", "application/json"),
        ("anything", "application/vnd.api+json"),
    ],
)
def test_text_files_by_name_or_media_type_are_decoded_as_utf8(name: str, media_type: str | None) -> None:
    assert read_file_text("héllo, wörld".encode(), name, media_type, ROOMY) == "héllo, wörld"


def test_a_byte_order_mark_is_not_part_of_the_text() -> None:
    assert read_file_text(b"\xef\xbb\xbfa,b\n1,2\n", "t.csv", None, ROOMY) == "a,b\n1,2\n"


def test_text_that_is_not_utf8_or_holds_nul_bytes_is_refused() -> None:
    with pytest.raises(Unreadable, match="'latin.txt' is not UTF-8 text"):
        read_file_text("café".encode("latin-1"), "latin.txt", None, ROOMY)
    with pytest.raises(Unreadable, match="'nul.txt' is binary"):
        read_file_text(b"a\x00b", "nul.txt", None, ROOMY)


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("word/document.xml", "<w:document/>")
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "media_type", "shown"),
    [
        ("sheet.xlsx", None, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        ("bundle.zip", None, "application/zip"),
        ("photo.png", "image/png", "image/png"),
        ("blob", None, "an unknown type"),
    ],
)
def test_what_is_neither_pdf_nor_text_is_refused_naming_its_type(
    name: str, media_type: str | None, shown: str
) -> None:
    with pytest.raises(
        Unreadable, match=f"'{name}' \\({shown}\\) cannot be read: this server reads PDFs, DOCX and PPTX"
    ):
        read_file_text(_zip(), name, media_type, ROOMY)


def test_an_encrypted_pdf_is_refused() -> None:
    with pytest.raises(Unreadable, match="'locked.pdf' is encrypted"):
        read_file_text(encrypted_pdf(["Secret"]), "locked.pdf", None, ROOMY)


def test_a_pdf_with_only_an_owner_password_opens() -> None:
    assert "Open to all" in read_file_text(encrypted_pdf(["Open to all"], password=""), "o.pdf", None, ROOMY)


@pytest.mark.parametrize("data", [b"%PDF-1.4\nnot really a pdf", make_pdf(["Cut short"])[:200]])
def test_a_broken_pdf_is_refused(data: bytes) -> None:
    with pytest.raises(Unreadable, match="'b.pdf' is not a readable PDF"):
        read_file_text(data, "b.pdf", None, ROOMY)

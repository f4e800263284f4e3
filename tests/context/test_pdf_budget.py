"""`PdfBudget` and `page_content_bytes` (context/pdf_budget.py): a request's PDF pages and decoded page content,
charged before any text is read, a stream shared by many pages counted once for each."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfReader

from tests.support.pdfs import make_pdf, shared_form_pdf, shared_stream_pdf
from vllm_responses.context.file_text import FileLimits, Unreadable, read_file_text
from vllm_responses.context.pdf_budget import OverBudget, PdfBudget, page_content_bytes

STREAM = len(b"BT /F1 12 Tf 72 720 Td " + b"() Tj " * 1000 + b"ET")
LIMITS = FileLimits(max_bytes=1 << 20, max_pages=100, max_chars=100_000)


def _page_bytes(data: bytes) -> list[int]:
    reader = PdfReader(io.BytesIO(data))
    sizes: dict[int, int] = {}
    return [page_content_bytes(page, sizes) for page in reader.pages]


def test_a_stream_shared_by_many_pages_is_counted_once_for_each() -> None:
    assert _page_bytes(shared_stream_pdf(5, 1000)) == [STREAM] * 5
    assert _page_bytes(shared_stream_pdf(5, 1000, shared=False)) == [STREAM] * 5


def test_forms_a_page_names_are_counted_with_their_nested_forms() -> None:
    drawn = len(b"/Fm0 Do")
    assert _page_bytes(shared_form_pdf(3, 5000)) == [drawn + 5000 + len(b"0 0 m 1 1 l")] * 3


def test_a_charge_past_the_budget_takes_nothing() -> None:
    budget = PdfBudget(pages=10, content_bytes=100)
    budget.charge(4, 60)
    with pytest.raises(OverBudget, match="--input-file-max-content-bytes"):
        budget.charge(1, 41)
    with pytest.raises(OverBudget, match="--input-file-max-request-pages"):
        budget.charge(7, 0)
    assert budget == PdfBudget(pages=6, content_bytes=40)


def test_the_pages_read_are_charged_and_pages_past_the_limit_are_not() -> None:
    budget = PdfBudget(pages=100, content_bytes=1 << 30)
    read_file_text(shared_stream_pdf(8, 1000), "a.pdf", None, FileLimits(1 << 20, 3, 100_000), budget)
    assert budget == PdfBudget(pages=97, content_bytes=(1 << 30) - 3 * STREAM)


def test_a_pdf_past_the_budget_is_unreadable_before_its_text_is_read() -> None:
    budget = PdfBudget(pages=100, content_bytes=50 * STREAM)
    with pytest.raises(Unreadable, match="once for every page that names it"):
        read_file_text(shared_stream_pdf(100, 1000), "big.pdf", None, LIMITS, budget)
    assert budget.content_bytes == 50 * STREAM  # nothing taken
    assert read_file_text(make_pdf(["Hi."]), "ok.pdf", None, LIMITS, budget).endswith("Hi.")


def test_pages_of_one_request_add_up_across_its_pdfs() -> None:
    budget = PdfBudget(pages=5, content_bytes=1 << 30)
    read_file_text(make_pdf(["a", "b", "c"]), "one.pdf", None, LIMITS, budget)
    with pytest.raises(Unreadable, match="--input-file-max-request-pages"):
        read_file_text(make_pdf(["a", "b", "c"]), "two.pdf", None, LIMITS, budget)

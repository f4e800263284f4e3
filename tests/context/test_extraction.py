"""`ExtractionPool` (context/extraction.py) on real worker processes: a PDF past a worker's memory is a clear
refusal and the worker is replaced; jobs past the pool's size wait their turn."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from tests.support.pdfs import _written, make_pdf
from vllm_responses.context.extraction import ExtractionLimits, ExtractionPool
from vllm_responses.context.file_text import FileLimits, Unreadable
from vllm_responses.context.pdf_budget import PdfBudget

LIMITS = FileLimits(max_bytes=1 << 20, max_pages=10, max_chars=10_000)


def _bomb(decoded: int) -> bytes:
    """A one-page PDF whose content stream is `decoded` bytes of spaces, Flate-compressed to a few KB."""
    packed = zlib.compress(b" " * decoded, 9)
    stream = f"<< /Length {len(packed)} /Filter /FlateDecode >>\nstream\n".encode() + packed + b"\nendstream"
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>"
    return _written(
        [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>", stream, page]
    )


def _budget() -> PdfBudget:
    return PdfBudget(pages=100, content_bytes=1 << 40)


async def test_a_pdf_past_the_workers_memory_is_refused_and_the_worker_replaced() -> None:
    pool = ExtractionPool(1, ExtractionLimits(cpu_s=30, timeout_s=60, memory_bytes=160 << 20))
    try:
        with pytest.raises(Unreadable, match="--input-file-extract-memory"):
            await pool.extract(_bomb(70_000_000), "bomb.pdf", None, LIMITS, _budget())
        assert pool.killed_total == 1 and pool.workers() == []
        text = await pool.extract(make_pdf(["fine"]), "ok.pdf", None, LIMITS, _budget())
        assert text.endswith("fine") and pool.started_total == 2
    finally:
        await pool.aclose()


async def test_jobs_past_the_pools_size_wait_and_all_are_answered() -> None:
    pool = ExtractionPool(2, ExtractionLimits(cpu_s=30, timeout_s=60, memory_bytes=1 << 30))
    try:
        jobs = [pool.extract(make_pdf([f"doc {i}"]), f"{i}.pdf", None, LIMITS, _budget()) for i in range(6)]
        texts = await asyncio.gather(*jobs)
        assert [t.rsplit("\n", 1)[-1] for t in texts] == [f"doc {i}" for i in range(6)]
        assert pool.started_total == 2 and pool.busy == 0 and pool.waiting == 0
    finally:
        await pool.aclose()
    assert pool.workers() == []

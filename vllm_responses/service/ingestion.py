"""`Ingestion`: vector store files made searchable in the background: the file's text extracted (bounded, as a
response's input files are), chunked with the chunking tokenizer, embedded in batches and indexed; the file then
`completed`, its parsed text kept in its parts (a PDF's pages, a PPTX's slides, else one) for its `/content`, or
`failed` with OpenAI's `last_error` codes.

Durable and leased: the work is the files' rows still `in_progress` (retrieval/vector_store_rows.py). This
process claims a few at a time under a lease it renews every heartbeat, so a file whose process stopped is taken
up again once its lease has expired, by this process after a restart or by any other sharing the database; a
process restarted under the same `--replica-id` takes its own back at once. A file cancelled or removed while it
is worked on keeps no chunk: its work here is cancelled, and a finish that finds it no longer in progress
removes what it indexed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from functools import partial
from pathlib import PurePosixPath

from vllm_responses.context.extraction import ExtractionPool
from vllm_responses.context.file_text import (
    EXTRACTED_KINDS,
    FileLimits,
    Unreadable,
    file_kind,
    read_file_parts,
)
from vllm_responses.context.pdf_budget import PdfBudget
from vllm_responses.engine.base import EngineError
from vllm_responses.engine.embedder import Embedder
from vllm_responses.executors import FILE_TEXT, run_on
from vllm_responses.protocol.errors import Unavailable
from vllm_responses.retrieval.chunk_vectors import embed_chunks
from vllm_responses.retrieval.chunking import ChunkingStrategy, chunk_text
from vllm_responses.retrieval.index import ChunkIndex, VectorDimensionsDiffer
from vllm_responses.retrieval.tokens import Tokenizer
from vllm_responses.retrieval.vector_store_records import FileRow
from vllm_responses.retrieval.vector_store_rows import VectorStoreRows
from vllm_responses.tools.files import FileService
from vllm_responses.tools.page_text import page_text

__all__ = ["Failed", "Ingestion", "is_html"]

logger = logging.getLogger(__name__)


def is_html(filename: str) -> bool:
    return PurePosixPath(filename.lower()).suffix in (".html", ".htm", ".xhtml")


def _html_text(data: bytes, max_chars: int) -> str:
    """An HTML file's readable text (its title, then its prose; scripts and styles dropped), cut at `max_chars`."""
    page = page_text(data, "text/html")
    text = f"{page.title}\n\n{page.text}" if page.title else page.text
    return text[:max_chars]


class Failed(Exception):
    """A file that cannot be ingested: its `last_error` code (`unsupported_file`, `invalid_file`,
    `server_error`) and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Ingestion:
    """The background worker that ingests vector store files (see the module docstring).

    Parameters
    ----------
    owner: this process's name in the files' leases (its replica id).
    lease_s / heartbeat_s: how long a claim lasts unrenewed; how often claims are renewed and new work looked for.
    concurrency: files ingested at once by this process.
    """

    def __init__(
        self,
        rows: VectorStoreRows,
        index: ChunkIndex,
        files: FileService,
        embedder: Embedder | None,
        tokenizer: Tokenizer,
        extraction: ExtractionPool,
        limits: FileLimits,
        *,
        owner: str,
        lease_s: float = 20.0,
        heartbeat_s: float = 2.0,
        concurrency: int = 2,
    ) -> None:
        self.rows = rows
        self.index = index
        self.files = files
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.extraction = extraction
        self.limits = limits
        self.owner = owner
        self.lease_s = lease_s
        self.heartbeat_s = max(0.05, min(heartbeat_s, lease_s / 3))
        self.concurrency = concurrency
        self.working: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Take back this owner's claims of a life before, and start looking for work."""
        await self.rows.release_own(self.owner)
        self._task = asyncio.create_task(self._loop(), name="vector-store-ingestion")

    def wake(self) -> None:
        """New work: look for it now rather than at the next heartbeat."""
        self._wake.set()

    def stop(self, vector_store_id: str, file_id: str | None = None) -> None:
        """This process's work on the file (every file of the vector store: `file_id` None) cancelled."""
        for (store, file), task in list(self.working.items()):
            if store == vector_store_id and file_id in (None, file):
                task.cancel()

    async def aclose(self) -> None:
        tasks = [t for t in (self._task, *self.working.values()) if t is not None]
        for task in tasks:
            task.cancel("the server is shutting down")
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            try:
                if self.working:
                    await self.rows.renew(self.owner, time.time() + self.lease_s)
                free = self.concurrency - len(self.working)
                if free > 0:
                    for row in await self.rows.claim(self.owner, time.time(), self.lease_s, free):
                        key = (row.vector_store_id, row.file_id)
                        task = asyncio.create_task(self._ingest(row), name=f"ingest-{row.file_id}")
                        self.working[key] = task
                        task.add_done_callback(partial(self._done, key))
            except Unavailable as exc:  # Postgres unreachable: tried again at the next heartbeat
                logger.warning("vector store ingestion: claiming files failed: %s", exc.message)
            except Exception:  # the database busy, or a bug: tried again at the next heartbeat
                logger.exception("vector store ingestion: claiming files failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat_s):
                    await self._wake.wait()
            self._wake.clear()

    def _done(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        self.working.pop(key, None)
        self._wake.set()  # a place is free: more work may wait

    async def _ingest(self, row: FileRow) -> None:
        try:
            usage, parts = await self._chunks_indexed(row)
        except Failed as exc:
            logger.info("vector store file %s failed: %s", row.file_id, exc.message)
            await self.rows.finish(row, self.owner, "failed", 0, {"code": exc.code, "message": exc.message})
            return
        except asyncio.CancelledError:
            await asyncio.shield(self._drop_if_gone(row))
            raise
        except Exception as exc:  # a bug or the database: the file fails rather than stays in progress
            logger.exception("vector store file %s failed", row.file_id)
            error = {
                "code": "server_error",
                "message": f"The file could not be ingested: {type(exc).__name__}.",
            }
            await self.rows.finish(row, self.owner, "failed", 0, error)
            return
        if not await self.rows.finish(row, self.owner, "completed", usage, content=parts):
            await self._drop_if_gone(row)
            return
        now = await self.rows.get_file(row.vector_store_id, row.file_id)
        if now is not None and now.attributes != row.attributes:  # re-attributed while it was ingested
            await self.index.set_attributes(row.vector_store_id, row.file_id, now.attributes)

    async def _drop_if_gone(self, row: FileRow) -> None:
        """The file's chunks removed unless the vector store still holds it (in progress again, or done)."""
        now = await self.rows.get_file(row.vector_store_id, row.file_id)
        if now is None or now.status in ("cancelled", "failed"):
            await self.index.delete_file(row.vector_store_id, row.file_id)

    async def _chunks_indexed(self, row: FileRow) -> tuple[int, list[str]]:
        """The file read, chunked, embedded and indexed; the bytes it keeps (its parsed text, its chunks' text and
        vectors) and its parsed text in parts."""
        if self.embedder is None:
            raise Failed("server_error", "This server has no embedding model (--embedding-model).")
        parts = await self._parts(row)
        text = "\n".join(parts)
        static = row.chunking.get("static", {})
        strategy = ChunkingStrategy(int(static["max_chunk_size_tokens"]), int(static["chunk_overlap_tokens"]))
        chunks = await run_on(FILE_TEXT, chunk_text, text, self.tokenizer, strategy)
        texts = [c.text for c in chunks]
        try:
            vectors, _ = await embed_chunks(self.embedder, self.tokenizer, texts)
        except EngineError as exc:
            raise Failed(
                "server_error", f"The embedding model could not embed the file: {exc.message}"
            ) from exc
        try:
            await self.index.add_file(row.vector_store_id, row.file_id, texts, vectors, row.attributes)
        except VectorDimensionsDiffer as exc:
            raise Failed(
                "server_error",
                f"The embedding model changed since the vector store's other files were added: {exc}",
            ) from exc
        kept = sum(len(t.encode()) for t in (*parts, *texts))
        return kept + int(vectors.nbytes), parts

    async def _parts(self, row: FileRow) -> list[str]:
        stored = await self.files.store.get_file(row.file_id)
        if stored is None:
            raise Failed("invalid_file", f"The file {row.file_id} was deleted before it was ingested.")
        if stored.bytes > self.limits.max_bytes:
            raise Failed(
                "invalid_file",
                f"The file {stored.filename!r} is {stored.bytes} bytes, past this server's limit of "
                f"{self.limits.max_bytes} bytes per file (--input-file-max-bytes).",
            )
        data = await self.files.read(stored)
        kind = file_kind(data, stored.filename, None)
        if kind is None:
            raise Failed(
                "unsupported_file",
                f"The file {stored.filename!r} is of a type this server does not read: PDFs, DOCX and PPTX "
                "documents and text files (UTF-8: plain text, markdown, HTML, CSV, JSON, source code) only.",
            )
        if is_html(stored.filename):
            return [await run_on(FILE_TEXT, _html_text, data, self.limits.max_chars)]
        try:
            if kind in EXTRACTED_KINDS:
                budget = PdfBudget(1 << 30, 1 << 62)  # one file: bounded by its own limits only
                return await self.extraction.extract_parts(data, stored.filename, None, self.limits, budget)
            return await run_on(FILE_TEXT, read_file_parts, data, stored.filename, None, self.limits)
        except Unreadable as exc:
            raise Failed("invalid_file", str(exc)) from None

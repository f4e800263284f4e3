"""`FileInputs`: the `input_file` parts of a request's items read as text, from the data they carry, a file of the
caller's (`file_id`: of the Files API, `file-...`, or of one of its containers, `cfile_...`), or a URL the
operator allows (`file_url`); `input_image` parts that name such a file or an http(s) URL fetched into data URLs
the same way.

Before any is read, the request's images and files are counted and its inline bytes summed (`InputBudget`,
context/input_budget.py): a 400 before anything is fetched or copied; what is fetched or copied then spends
the rest of the request's total as it arrives, and a source named twice in one request is read once.
Each part is read once, when its request arrives: the part is kept (stored, and in a conversation) with its
`filename` and its text (`extracted_text`) in place of its `file_data`, so a later response that continues
it shows the model the same file without the file's bytes. A part that cannot be read is a 400 naming it
(`input[i].content[j]`, or `.output[j]` of a tool output); context/file_text.py says what can be. A PDF, DOCX
or PPTX is read in the extraction pool's worker processes (context/extraction.py), charged to the request's `PdfBudget`
(`--input-file-max-request-pages`, `--input-file-max-content-bytes`); a text file and an image are checked in
threads of their own kind (executors.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from interpreter_service import ContainerNotFound, FileInfo
from vllm_responses.config import Config
from vllm_responses.context.extraction import ExtractionPool
from vllm_responses.context.file_text import (
    EXTRACTED_KINDS,
    FileLimits,
    Unreadable,
    file_kind,
    read_file_text,
)
from vllm_responses.context.images import ImageLimits, image_data_url
from vllm_responses.context.input_budget import PARTS_FIELD, InputBudget, InputLimits, Kind, media_parts
from vllm_responses.context.pdf_budget import PdfBudget
from vllm_responses.executors import FILE_TEXT, IMAGES, run_on
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.file_parts import FILE_SOURCES
from vllm_responses.protocol.files import is_file_id
from vllm_responses.protocol.ids import is_id
from vllm_responses.store.base import DEFAULT_PROJECT
from vllm_responses.tools.containers import ContainerService
from vllm_responses.tools.files import FileService
from vllm_responses.tools.net_guard import Refused, UrlPolicy, pinned_transport

__all__ = ["FileInputs"]

# Text files up to this size are read on the caller's thread: the hop to the file-text threads would cost more.
READ_INLINE_BYTES = 64 * 1024

_Source = tuple[bytes, str, str | None]  # a file's bytes, its name, its media type


@dataclass
class _Reading:
    """One call of `FileInputs.read`: whose containers it reads, its budgets (the images and files', and what
    its PDFs may cost to read), what it has read (by source)."""

    project: str
    budget: InputBudget
    pdfs: PdfBudget
    read: dict[tuple[Kind, str], _Source]


class FileInputs:
    """Reads `input_file` parts within the server's limits (`--input-file-*`, `--max-input-files`);
    `takes_images` says whether the served model reads images (asked at each request); `files`: the Files
    API's (None: `file-...` ids name nothing)."""

    def __init__(
        self,
        config: Config,
        containers: ContainerService,
        extraction: ExtractionPool,
        takes_images: Callable[[], bool] = lambda: True,
        *,
        files: FileService | None = None,
    ) -> None:
        self.containers = containers
        self.files = files
        self.extraction = extraction
        self.takes_images = takes_images
        self.pdf_pages = config.input_file_max_request_pages
        self.pdf_content_bytes = config.input_file_max_content_bytes
        self.input_limits = InputLimits(
            config.max_images,
            config.max_images_total_bytes,
            config.max_input_files,
            config.input_files_max_total_bytes,
        )
        self.limits = FileLimits(
            config.input_file_max_bytes, config.input_file_max_pages, config.input_file_max_chars
        )
        self.urls = UrlPolicy(config.input_file_allowed_urls, config.input_file_allow_private_networks)
        self.url_timeout = config.input_file_url_timeout
        self.image_limits = ImageLimits(config.max_image_bytes, config.max_image_pixels)
        self.image_urls = UrlPolicy(
            config.input_image_allowed_urls, config.input_image_allow_private_networks
        )

    def check(self, items: list[dict[str, Any]], param: str) -> InputBudget:
        """The images and files of `items` (wire form) counted, refused to a text-only model and their inline
        bytes summed, from the body alone (a 400 naming the part past a limit): the budget `read` spends."""
        return InputBudget(items, param, replace(self.input_limits, takes_images=self.takes_images()))

    async def read(
        self,
        items: list[dict[str, Any]],
        param: str,
        project: str = DEFAULT_PROJECT,
        budget: InputBudget | None = None,
    ) -> list[dict[str, Any]]:
        """`items` (in wire form) with each `input_file` part read: its `extracted_text` and `filename` set,
        its `file_data` dropped. `param` names the list (`input`, `items`) in errors; a `file_id` must be
        of one of `project`'s containers. `budget`: what `check` gave for these items (checked now if None)."""
        budget = budget if budget is not None else self.check(items, param)
        reading = _Reading(project, budget, PdfBudget(self.pdf_pages, self.pdf_content_bytes), {})
        out = []
        for i, item in enumerate(items):
            field = PARTS_FIELD.get(str(item.get("type", "message")))
            parts = item.get(field) if field else None
            if not isinstance(parts, list) or not any(_is_file(p) or _is_far_image(p) for p in parts):
                out.append(item)
                continue
            read = [
                await self._part(p, f"{param}[{i}].{field}[{j}]", reading)
                if _is_file(p)
                else await self._image(p, f"{param}[{i}].{field}[{j}]", reading)
                if _is_far_image(p)
                else p
                for j, p in enumerate(parts)
            ]
            out.append({**item, str(field): read})
        return out

    def reads(self, items: list[dict[str, Any]]) -> bool:
        """Whether `read` has work to do for `items` (in wire form): a file to read or an image to fetch."""
        return any(kind == "file" or _is_far_image(part) for _where, kind, part in media_parts(items, ""))

    async def _part(self, part: dict[str, Any], where: str, reading: _Reading) -> dict[str, Any]:
        """The part as kept once read (one sent back as kept, with its text and no source, as it is)."""
        given = [key for key in FILE_SOURCES if part.get(key)]
        if not given and part.get("extracted_text") is not None:
            return part
        if len(given) != 1:
            raise InvalidRequest(
                "An input_file takes exactly one of file_data, file_id and file_url"
                + (f", not {' and '.join(given)}." if given else "."),
                param=where,
            )
        if given[0] == "file_data":
            data, name, media = _decoded(part, where, self.limits.max_bytes)
        else:
            source = given[0]
            data, name, media = await self._elsewhere("file", source, str(part[source]), where, reading)
        name = str(part.get("filename") or name)
        try:
            text = await self._text(data, name, media, reading.pdfs)
        except Unreadable as exc:
            raise InvalidRequest(f"{exc} ({where})", param=where) from None
        kept = {key: value for key, value in part.items() if key != "file_data"}
        return {**kept, "filename": name, "extracted_text": text}

    async def _text(self, data: bytes, name: str, media: str | None, pdfs: PdfBudget) -> str:
        """The file's text: a PDF's, DOCX's or PPTX's read by the extraction pool, any other file's in a file-text thread (a small
        one's at once: the hop would cost more than reading it)."""
        if len(data) <= self.limits.max_bytes and file_kind(data, name, media) in EXTRACTED_KINDS:
            return await self.extraction.extract(data, name, media, self.limits, pdfs)
        if len(data) <= READ_INLINE_BYTES:
            return read_file_text(data, name, media, self.limits)
        return await run_on(FILE_TEXT, read_file_text, data, name, media, self.limits)

    async def _image(self, part: dict[str, Any], where: str, reading: _Reading) -> dict[str, Any]:
        """An `input_image` naming a container file or an http(s) URL, its image fetched, checked as a data URL's
        is (`--max-image-*`) and kept as a data URL in its `image_url` (so the model sees it again later)."""
        url = part.get("image_url")
        source = "image_url" if url else "file_id"
        data, _, _ = await self._elsewhere("image", source, str(url or part["file_id"]), where, reading)
        kept = {key: value for key, value in part.items() if key != "file_id"}
        return {**kept, "image_url": await run_on(IMAGES, image_data_url, data, where, self.image_limits)}

    async def _elsewhere(self, kind: Kind, source: str, ref: str, where: str, reading: _Reading) -> _Source:
        """The bytes, name and media type a part's `source` (`file_id`, `file_url`, `image_url`) names (`ref`: the
        id or URL), read once per request and spent from its budget as they arrive."""
        key = (kind, f"{source}:{ref}")
        if key not in reading.read:
            limit = self.image_limits.max_bytes if kind == "image" else self.limits.max_bytes

            def spend(size: int) -> None:
                reading.budget.spend(kind, size, where)

            if source == "file_id" and is_file_id(ref) and self.files is not None:
                reading.read[key] = await self._stored_file(ref, where, reading.project, limit, spend)
            elif source == "file_id":
                reading.read[key] = await self._container_file(ref, where, reading.project, limit, spend)
            else:
                policy = self.image_urls if kind == "image" else self.urls
                reading.read[key] = await self._fetched(ref, f"{where}.{source}", policy, limit, spend)
        return reading.read[key]

    async def _stored_file(
        self, file_id: str, where: str, project: str, max_bytes: int, spend: Callable[[int], None]
    ) -> _Source:
        """The bytes, filename and media type (by name) of `project`'s file `file_id` of the Files API, its
        size spent before it is read."""
        assert self.files is not None
        file = await self.files.get(file_id, project, f"{where}.file_id")
        if file.bytes > max_bytes:
            raise InvalidRequest(
                f"The file {file_id!r} is {file.bytes} bytes, past this server's limit of {max_bytes} bytes.",
                param=where,
            )
        spend(file.bytes)
        return await self.files.read(file), file.filename, mimetypes.guess_type(file.filename)[0]

    async def _container_file(
        self, file_id: str, where: str, project: str, max_bytes: int, spend: Callable[[int], None]
    ) -> _Source:
        """The bytes, base name and media type (by name) of the container file `file_id` of `project`'s, its
        size spent before it is copied out."""
        info = await self._find(file_id, project) if is_id(file_id, "cfile") else None
        if info is None:
            raise NotFound(
                f"No file {file_id!r}: a file_id names a file of the Files API (file-...) or of one of your "
                "containers (cfile_...).",
                param=f"{where}.file_id",
            )
        if info.bytes > max_bytes:
            raise InvalidRequest(
                f"The file {file_id!r} is {info.bytes} bytes, past this server's limit of {max_bytes} bytes.",
                param=where,
            )
        spend(info.bytes)
        try:
            data = await self.containers.content(info)
        except ContainerNotFound:
            raise NotFound(
                f"No file {file_id!r} in any of your containers.", param=f"{where}.file_id"
            ) from None
        name = PurePosixPath(info.path).name
        return data, name, mimetypes.guess_type(name)[0]

    async def _find(self, file_id: str, project: str) -> FileInfo | None:
        """The file with that id among `project`'s live containers (another project's are never looked in)."""
        if self.containers.interpreter is None:
            return None
        for container in await self.containers.list_all(project):
            with contextlib.suppress(ContainerNotFound):  # deleted or expired meanwhile
                found = await self.containers.file(container.id, file_id, project)
                if found is not None:
                    return found
        return None

    async def _fetched(
        self, url: str, param: str, policy: UrlPolicy, max_bytes: int, spend: Callable[[int], None]
    ) -> _Source:
        """The bytes at `url`, the name its path ends in and its Content-Type; a 400 naming `param` (a
        `file_url` or an `image_url`) when `policy` does not allow it, or it cannot be fetched within the
        limits (no redirects followed; each chunk spent as it arrives)."""
        import httpx2

        field = param.rsplit(".", 1)[-1]
        if not policy.allowed:
            flag = "--input-image-allowed-urls" if field == "image_url" else "--input-file-allowed-urls"
            raise InvalidRequest(
                f"Fetching an http(s) {field} is not enabled on this server ({flag}): send it as a data URL "
                "or a container file_id.",
                param=param,
                code="unsupported_value",
            )
        try:
            pinned = await policy.pin(url)
        except Refused:
            raise InvalidRequest(f"This {field} is not allowed on this server.", param=param) from None
        try:
            async with httpx2.AsyncClient(
                transport=pinned_transport(pinned), trust_env=False, follow_redirects=False
            ) as client:
                async with asyncio.timeout(self.url_timeout):
                    data, media = await _download(client, pinned.target.url, max_bytes, param, spend)
        except (TimeoutError, Refused, httpx2.HTTPError, OSError) as exc:
            raise InvalidRequest(
                f"The {field} could not be fetched ({type(exc).__name__}).", param=param
            ) from None
        return data, PurePosixPath(pinned.target.path).name or "file", media


async def _download(
    client: Any, url: str, max_bytes: int, param: str, spend: Callable[[int], None]
) -> tuple[bytes, str | None]:
    """The body of a GET of `url` (a 200 only) and its media type, refused past `max_bytes` (each chunk
    `spend`t as it arrives: the request's total stops it too)."""
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise InvalidRequest(
                f"The {param.rsplit('.', 1)[-1]} answered HTTP {response.status_code} (redirects are not followed).",
                param=param,
            )
        body = bytearray()
        async for chunk in response.aiter_bytes():
            spend(len(chunk))
            body += chunk
            if len(body) > max_bytes:
                raise InvalidRequest(
                    f"The {param.rsplit('.', 1)[-1]} is past this server's limit of {max_bytes} bytes.",
                    param=param,
                )
        media = response.headers.get("content-type")
        return bytes(body), media.split(";", 1)[0].strip() if media else None


def _is_file(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_file"


def _is_far_image(part: Any) -> bool:
    """An `input_image` whose image is elsewhere: a container file (`file_id`) or an http(s) `image_url`."""
    if not isinstance(part, dict) or part.get("type") != "input_image":
        return False
    url = part.get("image_url")
    return str(url).lower().startswith(("http://", "https://")) if url else bool(part.get("file_id"))


def _decoded(part: dict[str, Any], where: str, max_bytes: int) -> tuple[bytes, str, str | None]:
    """`file_data`'s bytes, a name for them and their media type: a data URL (`data:<type>;base64,...`) or
    plain base64 with `filename`."""
    raw, param = str(part["file_data"]), f"{where}.file_data"
    media: str | None = None
    if raw.startswith("data:"):
        head, comma, raw = raw[5:].partition(",")
        if not comma or not head.endswith(";base64"):
            raise InvalidRequest("file_data must be a base64 data URL (data:<type>;base64,...).", param=param)
        media = head.removesuffix(";base64").split(";", 1)[0].strip().lower() or None
    elif not part.get("filename"):
        raise InvalidRequest(
            "file_data given as plain base64 needs a filename (or send a data URL with its media type).",
            param=f"{where}.filename",
        )
    if len(raw) * 3 // 4 > max_bytes + 3:
        raise InvalidRequest(
            f"The file is past this server's limit of {max_bytes} bytes per file.", param=where
        )
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("file_data is not valid base64.", param=param) from None
    suffix = mimetypes.guess_extension(media) if media else None
    return data, "file" + (suffix or ""), media

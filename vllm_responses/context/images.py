"""Images given as input: `input_image` parts read from data URLs, checked against the limits, as engine `Image`s."""

from __future__ import annotations

import base64
import binascii
import io
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_responses.engine.types import Image
from vllm_responses.executors import IMAGES, run_on
from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import (
    CustomToolCallOutputInput,
    FunctionCallOutputInput,
    InputImage,
    InputItem,
    MessageInput,
)

__all__ = [
    "MEDIA_TYPES",
    "ImageLimits",
    "check_input_images",
    "check_input_images_off_loop",
    "code_result_images",
    "data_url_image",
    "image_data_url",
    "input_image_parts",
    "part_images",
]

# The formats a data URL may hold (what the hosted API takes), by media type.
MEDIA_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP", "image/gif": "GIF"}
_DATA_URL = re.compile(
    r"data:(?P<type>[a-z/+.-]+)(?:;[^,;]*)*;base64,(?P<data>.*)", re.DOTALL | re.IGNORECASE
)


@dataclass(frozen=True)
class ImageLimits:
    """What one image may weigh: encoded bytes, pixels (a small file that decodes to a huge bitmap is a
    decompression bomb). How many a request may give, and their bytes in all: context/input_budget.py."""

    max_bytes: int = 10 * 1024 * 1024
    max_pixels: int = 40_000_000


def input_image_parts(items: Sequence[InputItem], where: str = "input") -> Iterator[tuple[str, InputImage]]:
    """The `input_image` parts of `items` with the place each has in the body (`input[i].content[j]`; `where`
    names the list: `items` on the conversations routes)."""
    for i, item in enumerate(items):
        if isinstance(item, MessageInput) and not isinstance(item.content, str):
            for j, part in enumerate(item.content):
                if isinstance(part, InputImage):
                    yield f"{where}[{i}].content[{j}]", part
        elif isinstance(item, (FunctionCallOutputInput, CustomToolCallOutputInput)):
            if not isinstance(item.output, str):
                for j, out in enumerate(item.output):
                    if isinstance(out, InputImage):
                        yield f"{where}[{i}].output[{j}]", out


def check_input_images(items: Sequence[InputItem], limits: ImageLimits, where: str = "input") -> None:
    """Refuse (`InvalidRequest`, a 400 naming the part) a source this server does not read, an image that is
    not a PNG, JPEG, WebP or GIF, or one over the limits (the count and the model: `InputBudget`, first)."""
    for param, part in input_image_parts(items, where):
        url = part.image_url
        if not url and not part.file_id:
            raise InvalidRequest(
                "Cannot read this input_image: it has neither image_url nor file_id.", param=param
            )
        if url and url.startswith("data:"):
            data_url_image(url, f"{param}.image_url", limits)
        elif url and not url.lower().startswith(("http://", "https://")):
            raise InvalidRequest(
                "An image_url is a data URL (data:image/png;base64,...) or an http(s) URL.",
                param=f"{param}.image_url",
            )


# Inline images up to this many characters of data URL in all are checked on the caller's thread: the hop to
# the image threads would cost more than checking them.
CHECK_INLINE_CHARS = 64 * 1024


async def check_input_images_off_loop(
    items: Sequence[InputItem], limits: ImageLimits, where: str = "input"
) -> None:
    """`check_input_images`, in one of the image threads unless the images are small (`CHECK_INLINE_CHARS`)."""
    size = sum(len(part.image_url or "") for _, part in input_image_parts(items, where))
    if size <= CHECK_INLINE_CHARS:
        check_input_images(items, limits, where)
    else:
        await run_on(IMAGES, check_input_images, items, limits, where)


def data_url_image(url: str, param: str, limits: ImageLimits | None = None) -> Image:
    """The image a base64 data URL holds, decoded and verified with PIL (and checked against `limits`)."""
    match = _DATA_URL.fullmatch(url.strip())
    if match is None or match["type"].lower() not in MEDIA_TYPES:
        raise InvalidRequest(
            f"Invalid image data URL: expected data:<{'|'.join(MEDIA_TYPES)}>;base64,<data>.", param=param
        )
    media_type = match["type"].lower()
    try:
        data = base64.b64decode(match["data"], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("Invalid image data URL: its data is not valid base64.", param=param) from None
    if limits is not None:
        _check_image(data, media_type, param, limits)
    return Image(data, media_type)


def image_data_url(data: bytes, param: str, limits: ImageLimits) -> str:
    """Fetched image bytes (an http(s) image_url's, a container file's), checked as a data URL's are, as the
    data URL kept in their place (its media type the one the bytes are)."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as img:
            fmt = img.format
    except Exception:  # PIL's UnidentifiedImageError, a truncated header
        raise InvalidRequest("The image could not be decoded.", param=param, code="invalid_image") from None
    media_type = next((t for t, f in MEDIA_TYPES.items() if f == fmt), None)
    if media_type is None:
        raise InvalidRequest(f"The image is {fmt}, not PNG, JPEG, WebP or GIF.", param=param)
    _check_image(data, media_type, param, limits)
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _check_image(data: bytes, media_type: str, param: str, limits: ImageLimits) -> None:
    from PIL import Image as PILImage

    if len(data) > limits.max_bytes:
        raise InvalidRequest(
            f"The image is {len(data)} bytes; at most {limits.max_bytes} are allowed.",
            param=param,
            code="image_too_large",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data)) as img:
                pixels = img.width * img.height
                if pixels > limits.max_pixels:
                    raise InvalidRequest(
                        f"The image is {img.width}x{img.height} pixels; at most {limits.max_pixels} are allowed.",
                        param=param,
                        code="image_too_large",
                    )
                fmt = img.format
                img.verify()
    except InvalidRequest:
        raise
    except Exception as exc:  # PIL's UnidentifiedImageError, a truncated file, a decompression bomb
        raise InvalidRequest(
            f"The image could not be decoded: {exc}", param=param, code="invalid_image"
        ) from None
    if fmt != MEDIA_TYPES[media_type]:
        raise InvalidRequest(f"The image is {fmt}, not {media_type} as its data URL says.", param=param)


def part_images(parts: Sequence[InputImage]) -> tuple[Image, ...]:
    """Checked parts' images (a source other than a data URL, refused when the request came, is skipped)."""
    return tuple(
        data_url_image(p.image_url, "image_url")
        for p in parts
        if p.image_url and p.image_url.startswith("data:")
    )


def code_result_images(outputs: Sequence[Mapping[str, Any]] | None) -> tuple[Image, ...]:
    """The images (PNG data URLs) among a code cell's outputs."""
    images: list[Image] = []
    for out in outputs or ():
        url = out.get("url")
        if out.get("type") == "image" and isinstance(url, str) and url.startswith("data:"):
            try:
                images.append(data_url_image(url, "url"))
            except InvalidRequest:
                continue
    return tuple(images)

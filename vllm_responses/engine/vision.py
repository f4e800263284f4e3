"""A vision model's prompt as vLLM takes it: the images decoded for its processor, and its length once expanded."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from vllm.inputs import TokensPrompt

from vllm_responses.engine.base import EngineRejected
from vllm_responses.engine.prompt import prompt_images
from vllm_responses.engine.types import Image, Turn

__all__ = ["expanded_length", "tokens_prompt"]


def _pil(image: Image) -> Any:
    """An image as vLLM's processors take it: a PIL image in RGB."""
    from PIL import Image as PILImage

    with PILImage.open(io.BytesIO(image.data)) as img:
        return img.convert("RGB")


def tokens_prompt(turns: Sequence[Turn], prompt_ids: list[int], *, takes_images: bool) -> TokensPrompt:
    """The prompt as vLLM takes it: its tokens (an image's placeholder token where it goes), and, for a
    vision model, the turns' images decoded with PIL as `multi_modal_data`."""
    images = prompt_images(turns) if takes_images else []
    if not images:
        return TokensPrompt(prompt_token_ids=prompt_ids)
    return TokensPrompt(prompt_token_ids=prompt_ids, multi_modal_data={"image": [_pil(i) for i in images]})


def expanded_length(llm: Any, prompt: TokensPrompt) -> int:
    """The prompt's tokens as the model reads them: each image's placeholder expanded by `llm`'s (an
    `AsyncLLM`'s) processor into the image's own tokens. That runs vLLM's renderer (`_process_tokens`, not a
    public API: pinned by tests/engine/test_vision_real.py), as the engine will on the call."""
    if "multi_modal_data" not in prompt:
        return len(prompt["prompt_token_ids"])
    try:
        processed = llm.renderer._process_tokens(prompt, skip_mm_cache=True)
    except Exception as exc:  # the processor refuses the images (a mismatch, a format it cannot read)
        raise EngineRejected(f"the model cannot read these images: {exc}", code="invalid_image") from exc
    return len(processed["prompt_token_ids"])

"""Image inputs kept with a conversation: stored as given, shown to the (fake, vision) model on later turns."""

from __future__ import annotations

import base64
import io

import openai
from PIL import Image as PILImage

from tests.support.fakes import FakeEngine, say
from vllm_responses.engine.types import Image, Message

MODEL = "fake-model"


def _png() -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (4, 4), (0, 0, 255)).save(buf, "PNG")
    return buf.getvalue()


def test_a_conversations_image_is_stored_as_given_and_seen_again(
    client: openai.OpenAI, engine: FakeEngine
) -> None:
    png = _png()
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    engine.images = True
    try:
        conv = client.conversations.create()
        engine.reset(say("Blue."))
        message = {
            "role": "user",
            "content": [{"type": "input_text", "text": "Colour?"}, {"type": "input_image", "image_url": url}],
        }
        client.responses.create(model=MODEL, conversation=conv.id, input=[message])  # type: ignore[list-item]
        client.responses.create(model=MODEL, conversation=conv.id, input="And now?")
    finally:
        engine.images = False
    first = engine.requests[-1].turns[0]
    assert first == Message("user", "Colour?", (Image(png, "image/png"),))
    items = client.conversations.items.list(conv.id, order="asc").data
    stored = items[0].content  # type: ignore[union-attr]
    assert [p.type for p in stored] == ["input_text", "input_image"]  # as sent
    assert stored[1].image_url == url  # type: ignore[union-attr]

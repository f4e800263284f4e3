"""DOCX and PPTX files through a live server and the `openai` SDK: added to a vector store, they are read (in the
extraction worker), searchable, and their `/content` is their parsed text (a PPTX slide by slide); given to a
response as an `input_file`, the model reads their text."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from openai.types.vector_stores import FileContentResponse, VectorStoreFile

from tests.service.test_vector_stores import checked, sdk, serve, upload
from tests.support.fake_embedder import FakeEmbedder
from tests.support.fakes import FakeEngine
from tests.support.office_docs import make_docx, make_pptx
from tests.support.serving import LiveServer
from vllm_responses.engine.types import Message

DOCX = make_docx(["Owls hunt at night.", "The barn owl hears mice under snow."], [["owl", "night"]])
PPTX = make_pptx([("Tides", "The moon pulls the sea."), ("Bread", "Yeast makes gas.")])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = serve(tmp_path_factory.mktemp("office"), FakeEmbedder(max_input_tokens=100_000))
    yield live
    live.stop()


@pytest.mark.parametrize(
    ("name", "data", "parts", "query"),
    [
        (
            "owls.docx",
            DOCX,
            ["Owls hunt at night.\nThe barn owl hears mice under snow.\nowl | night"],
            "barn owl mice",
        ),
        (
            "deck.pptx",
            PPTX,
            [
                "--- slide 1 of 2 ---\nTides\nThe moon pulls the sea.",
                "--- slide 2 of 2 ---\nBread\nYeast makes gas.",
            ],
            "yeast gas",
        ),
    ],
)
def test_office_files_are_ingested_searched_and_shown_as_their_parsed_text(
    server: LiveServer, name: str, data: bytes, parts: list[str], query: str
) -> None:
    client = sdk(server)
    file_id = upload(client, name, data)
    store = client.vector_stores.create(name=name)
    row = checked(
        client.vector_stores.files.create_and_poll(file_id=file_id, vector_store_id=store.id), VectorStoreFile
    )
    assert row.status == "completed" and row.last_error is None, row
    found = client.vector_stores.search(store.id, query=query)
    assert found.data and found.data[0].file_id == file_id and found.data[0].filename == name
    assert query.split()[0] in found.data[0].content[0].text.lower()
    content = client.vector_stores.files.content(file_id, vector_store_id=store.id)
    assert [checked(c, FileContentResponse).text for c in content.data] == parts
    assert {c.type for c in content.data} == {"text"}


def test_a_broken_docx_fails_as_an_invalid_file(server: LiveServer) -> None:
    client = sdk(server)
    store = client.vector_stores.create(name="broken")
    file_id = upload(client, "broken.docx", b"PK\x03\x04 this is not a zip")
    row = client.vector_stores.files.create_and_poll(file_id=file_id, vector_store_id=store.id)
    assert row.status == "failed" and row.last_error is not None and row.last_error.code == "invalid_file"
    assert "is not a readable DOCX" in row.last_error.message


def test_a_docx_input_file_reaches_the_model_as_its_text(server: LiveServer) -> None:
    engine: FakeEngine = server.engine
    engine.reset()
    part = {
        "type": "input_file",
        "filename": "owls.docx",
        "file_data": "data:application/vnd.openxmlformats-officedocument.wordprocessingml.document;base64,"
        + base64.b64encode(DOCX).decode(),
    }
    sdk(server).responses.create(model="fake-model", input=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    (user,) = [t for t in engine.requests[0].turns if isinstance(t, Message) and t.role == "user"]
    assert (
        '<file name="owls.docx">\nOwls hunt at night.\nThe barn owl hears mice under snow.\nowl | night\n</file>'
        in (user.text)
    )


def test_a_pptx_given_by_file_id_reaches_the_model_slide_by_slide(server: LiveServer) -> None:
    engine: FakeEngine = server.engine
    engine.reset()
    client = sdk(server)
    file_id = upload(client, "deck.pptx", PPTX)
    client.responses.create(
        model="fake-model", input=[{"role": "user", "content": [{"type": "input_file", "file_id": file_id}]}]
    )
    (user,) = [t for t in engine.requests[0].turns if isinstance(t, Message) and t.role == "user"]
    assert "--- slide 1 of 2 ---\nTides\nThe moon pulls the sea.\n--- slide 2 of 2 ---\nBread" in user.text

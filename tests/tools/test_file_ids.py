"""A Files API `file_id` wherever the SDK takes one, through a live server and the `openai` SDK: `input_file`
(read as text), `input_image` (an image file), `POST /v1/containers` `file_ids` and a container file made from a
`file_id`, and a code interpreter's `auto` container with `file_ids` (copied into /mnt/data, read by code); a
file of another project, or none, is a 404 naming the param."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from PIL import Image as PILImage

from tests.api.test_files import KEY_A, KEY_B, keyed, sdk
from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say
from tests.support.serving import LiveServer
from tests.support.wire import check_stream, parse_sse, sdk_refusal
from vllm_responses.engine.types import Image, Message

MODEL = "fake-model"
OUTPUTS: Any = ["code_interpreter_call.outputs"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("file_ids")
    live = LiveServer(keyed(root), FakeEngine(), FakeInterpreter(max_containers=50), db=str(root / "r.db"))
    yield live.start()
    live.stop()


@pytest.fixture
def engine(server: LiveServer) -> FakeEngine:
    fake: FakeEngine = server.engine
    fake.reset()
    fake.images = True
    return fake


def _png() -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (4, 4), (255, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


def _notes(client: openai.OpenAI) -> str:
    return client.files.create(file=("notes.md", b"# Notes\nShip on Friday."), purpose="user_data").id


def _user(parts: list[dict[str, Any]]) -> Any:
    return [{"role": "user", "content": parts}]


def test_an_input_file_reads_a_file_by_its_id(server: LiveServer, engine: FakeEngine) -> None:
    client = sdk(server)
    file_id = _notes(client)
    done = client.responses.create(model=MODEL, input=_user([{"type": "input_file", "file_id": file_id}]))
    assert done.status == "completed"
    turns = [t for t in engine.requests[0].turns if isinstance(t, Message) and t.role == "user"]
    assert turns[-1].text == '\n<file name="notes.md">\n# Notes\nShip on Friday.\n</file>\n'


def test_an_input_image_reads_an_image_file_by_its_id(server: LiveServer, engine: FakeEngine) -> None:
    client = sdk(server)
    red = _png()
    file_id = client.files.create(file=("red.png", red), purpose="vision").id
    parts = [
        {"type": "input_text", "text": "Colour?"},
        {"type": "input_image", "file_id": file_id, "detail": "auto"},
    ]
    client.responses.create(model=MODEL, input=_user(parts))
    assert engine.requests[0].turns[-1] == Message("user", "Colour?", (Image(red, "image/png"),))


def test_another_projects_file_or_none_is_a_404_naming_the_part(
    server: LiveServer, engine: FakeEngine
) -> None:
    a, b = sdk(server, KEY_A), sdk(server, KEY_B)
    file_id = _notes(a)
    for ref in (file_id, "file-" + "0" * 24):
        for part in (
            {"type": "input_file", "file_id": ref},
            {"type": "input_image", "file_id": ref, "detail": "auto"},
        ):
            error = sdk_refusal(lambda part=part: b.responses.create(model=MODEL, input=_user([part])))  # type: ignore[misc]
            assert error["code"] == "not_found" and error["param"] == "input[0].content[0].file_id"
    assert engine.requests == []


def test_a_container_made_with_file_ids_holds_them_in_mnt_data(server: LiveServer) -> None:
    client, fake = sdk(server), server.interpreter
    notes = _notes(client)
    data = client.files.create(file=("data.csv", b"x,y\n1,2\n"), purpose="assistants").id
    box = client.containers.create(name="with files", file_ids=[notes, data])
    listed = {f.path: f.bytes for f in client.containers.files.list(box.id)}
    assert listed == {"/mnt/data/notes.md": 23, "/mnt/data/data.csv": 8}
    assert fake.files[box.id]["/mnt/data/data.csv"] == b"x,y\n1,2\n"
    later = client.files.create(file=("later.txt", b"later"), purpose="user_data").id
    copied = client.containers.files.create(box.id, file_id=later)
    assert copied.path == "/mnt/data/later.txt" and copied.source == "user"
    assert client.containers.files.content.retrieve(copied.id, container_id=box.id).read() == b"later"


def test_container_file_ids_of_another_project_are_not_found(server: LiveServer) -> None:
    a, b, fake = sdk(server, KEY_A), sdk(server, KEY_B), server.interpreter
    theirs = _notes(a)
    before = set(fake.infos)
    error = sdk_refusal(lambda: b.containers.create(name="x", file_ids=[_notes(b), theirs]))
    assert error["code"] == "not_found" and error["param"] == "file_ids[1]"
    assert set(fake.infos) == before  # no container made
    box = b.containers.create(name="mine")
    error = sdk_refusal(lambda: b.containers.files.create(box.id, file_id=theirs))
    assert error["code"] == "not_found" and error["param"] == "file_id"
    tools: Any = [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": [theirs]}}]
    error = sdk_refusal(lambda: b.responses.create(model=MODEL, input="x", tools=tools))
    assert error["code"] == "not_found" and error["param"] == "tools[0].container.file_ids[0]"


def test_code_reads_the_files_of_its_auto_containers_file_ids(server: LiveServer, engine: FakeEngine) -> None:
    client = sdk(server)
    file_id = _notes(client)
    engine.reset(code_call("print(load('/mnt/data/notes.md')); save('notes.md', 'edited')"), say("Read it."))
    tools: Any = [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": [file_id]}}]
    body = {"model": MODEL, "input": "Read my notes", "tools": tools, "include": OUTPUTS, "stream": True}
    r = httpx.post(
        server.base_url + "/v1/responses", json=body, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30
    )
    events = parse_sse(r.text)
    check_stream(events)  # every event validated against the SDK's types
    done = client.responses.retrieve(events[-1]["response"]["id"], include=OUTPUTS)
    call = next(it for it in done.output if it.type == "code_interpreter_call")
    assert [o.logs for o in call.outputs or [] if o.type == "logs"] == ["# Notes\nShip on Friday.\n"]
    # continued with the same tool: the container is reused, its edited file kept (not copied over again)
    engine.reset(code_call("print(load('/mnt/data/notes.md'))"), say("Again."))
    again = client.responses.create(
        model=MODEL, input="Again", tools=tools, include=OUTPUTS, previous_response_id=done.id
    )
    call2 = next(it for it in again.output if it.type == "code_interpreter_call")
    assert call2.container_id == call.container_id
    assert [o.logs for o in call2.outputs or [] if o.type == "logs"] == ["edited\n"]

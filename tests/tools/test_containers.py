"""Containers and container files through the real `openai` SDK, over the fake engine and in-process interpreter."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types import ContainerCreateResponse, ContainerListResponse, ContainerRetrieveResponse
from openai.types.containers import FileCreateResponse, FileListResponse

from tests.api.test_responses import _plain, raw_stream
from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say
from tests.support.serving import LiveServer
from tests.support.wire import validate_as, validate_response
from vllm_responses.config import Config
from vllm_responses.engine.types import Finish

MODEL = "fake-model"


@pytest.fixture
def made(client: openai.OpenAI) -> Iterator[str]:
    """A container created through the API, deleted afterwards when still there."""
    c = client.containers.create(name="made")
    yield c.id
    try:
        client.containers.delete(c.id)
    except openai.NotFoundError:
        pass


def _raw(client: openai.OpenAI, method: str, path: str, **kw: object) -> httpx.Response:
    return httpx.request(method, str(client.base_url).rstrip("/") + path, timeout=10, **kw)  # type: ignore[arg-type]


def test_create_get_list_delete(client: openai.OpenAI, fake_server: LiveServer) -> None:
    before = int(time.time())
    created = client.containers.create(
        name="analysis", expires_after={"anchor": "last_active_at", "minutes": 5}, memory_limit="4g"
    )
    raw = _raw(client, "GET", f"/containers/{created.id}").json()
    validate_as(ContainerRetrieveResponse, raw)
    validate_as(ContainerCreateResponse, created.model_dump(mode="json"))
    assert created.id.startswith("cntr_") and created.object == "container" and created.status == "running"
    assert created.name == "analysis" and created.memory_limit == "4g"
    assert created.expires_after is not None and created.expires_after.minutes == 5
    assert created.expires_after.anchor == "last_active_at"
    assert before - 1 <= created.created_at <= created.last_active_at <= time.time() + 1
    assert client.containers.retrieve(created.id).model_dump() == created.model_dump()

    others = [client.containers.create(name=f"n{i}").id for i in range(3)]
    page = client.containers.list(limit=2, order="asc")
    body = _raw(client, "GET", "/containers", params={"limit": 2, "order": "asc"}).json()
    assert set(body) == {"object", "data", "first_id", "last_id", "has_more"} and body["object"] == "list"
    for c in body["data"]:
        validate_as(ContainerListResponse, c)
    every = [c.id for c in client.containers.list(order="asc")]  # the SDK follows `after` cursors
    assert every.index(created.id) < every.index(others[0]) < every.index(others[1]) < every.index(others[2])
    assert len(page.data) == 2 and page.has_more
    newest_first = [c.id for c in client.containers.list(order="desc", limit=100).data]
    assert newest_first[:3] == others[::-1]
    assert [c.id for c in client.containers.list(name="n1").data] == [others[1]]

    deleted = _raw(client, "DELETE", f"/containers/{created.id}").json()
    assert deleted == {"id": created.id, "object": "container.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError) as ei:
        client.containers.retrieve(created.id)
    assert ei.value.body["param"] == "container_id"  # type: ignore[index]
    assert created.id not in [c.id for c in client.containers.list(limit=100).data]
    for cid in others:
        client.containers.delete(cid)


@pytest.mark.parametrize(
    "body,param",
    [
        ({}, "name"),
        ({"name": "x", "expires_after": {"anchor": "created_at", "minutes": 5}}, "expires_after.anchor"),
        ({"name": "x", "expires_after": {"anchor": "last_active_at", "minutes": 0}}, "expires_after.minutes"),
        ({"name": "x", "memory_limit": "2g"}, "memory_limit"),
        ({"name": "x", "file_ids": "file-abc"}, "file_ids"),
        (
            {"name": "x", "network_policy": {"type": "allowlist", "allowed_domains": ["a.b"]}},
            "network_policy.type",
        ),
        ({"name": "x", "skills": [{"type": "skill_reference", "skill_id": "s"}]}, "skills"),
        ([1], "body"),
    ],
)
def test_bad_create_is_400(client: openai.OpenAI, body: object, param: str) -> None:
    r = _raw(client, "POST", "/containers", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["param"] == param and err["message"]


def test_unknown_ids_are_404(client: openai.OpenAI, made: str) -> None:
    for method, path, param in [
        ("GET", "/containers/cntr_nope", "container_id"),
        ("DELETE", "/containers/cntr_nope", "container_id"),
        ("GET", "/containers/cntr_nope/files", "container_id"),
        ("GET", f"/containers/{made}/files/cfile_nope", "file_id"),
        ("GET", f"/containers/{made}/files/cfile_nope/content", "file_id"),
        ("DELETE", f"/containers/{made}/files/cfile_nope", "file_id"),
    ]:
        r = _raw(client, method, path)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"
    r = _raw(client, "POST", "/containers/cntr_nope/files", files={"file": ("a.txt", b"x")})
    assert r.status_code == 404 and r.json()["error"]["param"] == "container_id"


def test_list_paging_errors(client: openai.OpenAI) -> None:
    for params, param in [
        ({"limit": 0}, "limit"),
        ({"order": "up"}, "order"),
        ({"after": "cntr_nope"}, "after"),
    ]:
        r = _raw(client, "GET", "/containers", params=params)
        assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_upload_is_visible_to_code_and_listed(
    client: openai.OpenAI, engine: FakeEngine, made: str, fake_server: LiveServer
) -> None:
    up = client.containers.files.create(made, file=("in.csv", b"a,b\n1,2\n"))
    validate_as(FileCreateResponse, _raw(client, "GET", f"/containers/{made}/files/{up.id}").json())
    assert up.object == "container.file" and up.path == "/mnt/data/in.csv" and up.bytes == 8
    assert up.source == "user" and up.container_id == made and up.id.startswith("cfile_")
    assert client.containers.files.retrieve(up.id, container_id=made).model_dump() == up.model_dump()
    assert client.containers.files.content.retrieve(up.id, container_id=made).read() == b"a,b\n1,2\n"

    engine.reset(code_call("print(load('/mnt/data/in.csv').splitlines()[1])"), say("Row one is 1,2."))
    resp = client.responses.create(
        model=MODEL,
        input="read it",
        tools=[{"type": "code_interpreter", "container": made}],
        include=["code_interpreter_call.outputs"],
    )
    call = resp.output[0]
    assert call.type == "code_interpreter_call" and call.container_id == made
    assert call.outputs is not None and call.outputs[0].logs == "1,2\n"  # type: ignore[union-attr]

    # A same-named upload replaces the file and keeps its id.
    again = client.containers.files.create(made, file=("in.csv", b"new"))
    assert again.id == up.id and again.bytes == 3
    listed = client.containers.files.list(made)
    for f in _raw(client, "GET", f"/containers/{made}/files").json()["data"]:
        validate_as(FileListResponse, f)
    assert [f.id for f in listed.data] == [up.id]
    client.containers.files.delete(up.id, container_id=made)
    assert client.containers.files.list(made).data == []
    with pytest.raises(openai.NotFoundError):
        client.containers.files.retrieve(up.id, container_id=made)


def test_files_code_writes_are_listed_and_downloadable(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("save('report/out.csv', 'x,y\\n1,4\\n')"), say("Saved."))
    resp = client.responses.create(model=MODEL, input="write", tools=[{"type": "code_interpreter"}])
    cid = resp.output[0].container_id  # type: ignore[union-attr]
    files = client.containers.files.list(cid).data
    assert [(f.path, f.source, f.bytes) for f in files] == [("/mnt/data/report/out.csv", "assistant", 8)]
    r = _raw(client, "GET", f"/containers/{cid}/files/{files[0].id}/content")
    assert r.content == b"x,y\n1,4\n" and r.headers["content-type"].startswith("text/csv")
    assert "out.csv" in r.headers["content-disposition"]


def test_upload_errors(client: openai.OpenAI, made: str) -> None:
    r = _raw(client, "POST", f"/containers/{made}/files", json={"file_id": "file-123"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "file_id"  # no such file of the Files API
    r = _raw(client, "POST", f"/containers/{made}/files", files={"other": ("a.txt", b"x")})
    assert r.status_code == 400 and r.json()["error"]["param"] == "file"
    r = _raw(client, "POST", f"/containers/{made}/files", files={"file": ("..", b"x")})
    assert r.status_code == 400 and r.json()["error"]["param"] == "file"
    r = _raw(
        client, "POST", f"/containers/{made}/files", content=b"raw", headers={"content-type": "text/plain"}
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "file"
    # A path in the upload's name is dropped: the file lands in /mnt/data under its base name.
    up = client.containers.files.create(made, file=("../../etc/evil.txt", b"x"))
    assert up.path == "/mnt/data/evil.txt"


def test_tool_container_and_file_ids_must_exist(client: openai.OpenAI, made: str) -> None:
    def create(*tools: dict[str, object]) -> httpx.Response:
        return _raw(client, "POST", "/responses", json={"model": MODEL, "input": "hi", "tools": list(tools)})

    client.containers.delete(made)
    r = create({"type": "function", "name": "f"}, {"type": "code_interpreter", "container": made})
    assert r.status_code == 404 and r.json()["error"]["param"] == "tools[1].container"
    r = create({"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["f"]}})
    assert r.status_code == 404 and r.json()["error"]["param"] == "tools[0].container.file_ids[0]"
    r = create({"type": "code_interpreter", "container": {"type": "auto", "file_ids": []}})
    assert r.status_code == 200


def test_short_expires_after_is_enforced(client: openai.OpenAI, fake_server: LiveServer) -> None:
    c = client.containers.create(name="brief", expires_after={"anchor": "last_active_at", "minutes": 1})
    interp: FakeInterpreter = fake_server.interpreter
    info = interp.infos[c.id]
    interp.infos[c.id] = type(info)(**{**info.__dict__, "last_active_at": time.time() - 61})
    with pytest.raises(openai.NotFoundError):
        client.containers.retrieve(c.id)
    assert c.id not in interp.infos  # deleted from the pool, its slot freed


def test_pool_full_is_429_and_disabled_interpreter_is_400() -> None:
    server = LiveServer(Config(), FakeEngine(), FakeInterpreter(max_containers=1)).start()
    try:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        client.containers.create(name="one")
        with pytest.raises(openai.RateLimitError) as ei:
            client.containers.create(name="two")
        assert ei.value.body["code"] == "pool_exhausted"  # type: ignore[index]
    finally:
        server.stop()
    server = LiveServer(Config(code_interpreter=False), FakeEngine(), None).start()
    try:
        r = httpx.post(server.base_url + "/v1/containers", json={"name": "x"}, timeout=10)
        assert r.status_code == 400 and "disabled" in r.json()["error"]["message"]
    finally:
        server.stop()


# --- container_file_citation --------------------------------------------------------------------------

WRITE = "save('out.csv', 'a,b\\n1,2\\n')\nsave('plot.png', b'png')"
ANSWER = "Wrote out.csv for you."


def _citations(message: dict) -> list[dict]:
    return message["content"][0]["annotations"]


def test_citations_non_stream(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call(WRITE), say(ANSWER))
    resp = client.responses.create(model=MODEL, input="write", tools=[{"type": "code_interpreter"}])
    validate_response(resp.model_dump(mode="json", exclude_unset=True))
    cid = resp.output[0].container_id  # type: ignore[union-attr]
    files = {f.path: f.id for f in client.containers.files.list(cid).data}
    cites = [a.model_dump() for a in resp.output[1].content[0].annotations]  # type: ignore[union-attr]
    at = ANSWER.index("out.csv")
    assert cites == [
        {
            "type": "container_file_citation",
            "container_id": cid,
            "file_id": files["/mnt/data/out.csv"],
            "filename": "out.csv",
            "start_index": at,
            "end_index": at + len("out.csv"),
        },
        {  # not mentioned: cited at the end of the last message
            "type": "container_file_citation",
            "container_id": cid,
            "file_id": files["/mnt/data/plot.png"],
            "filename": "plot.png",
            "start_index": len(ANSWER),
            "end_index": len(ANSWER),
        },
    ]
    data = client.containers.files.content.retrieve(cites[0]["file_id"], container_id=cid).read()
    assert data == b"a,b\n1,2\n"
    stored = client.responses.retrieve(resp.id)
    assert stored.output[1].content[0].annotations == resp.output[1].content[0].annotations  # type: ignore[union-attr]


def test_no_files_no_citations(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call("print('out.csv')"), say(ANSWER))
    resp = client.responses.create(model=MODEL, input="x", tools=[{"type": "code_interpreter"}])
    assert resp.output[1].content[0].annotations == []  # type: ignore[union-attr]


def test_citations_stream_events(fake_server: LiveServer, engine: FakeEngine) -> None:
    engine.reset(code_call(WRITE), say(ANSWER))
    events = raw_stream(
        fake_server, {"model": MODEL, "input": "write", "tools": [{"type": "code_interpreter"}]}
    )
    types = [e["type"] for e in events]
    added = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert [a["annotation_index"] for a in added] == [0, 1]
    assert [a["annotation"]["filename"] for a in added] == ["out.csv", "plot.png"]
    first = types.index("response.output_text.annotation.added")
    assert types[first - 1] == "response.output_text.delta"
    assert types[first + 2 : first + 5] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    part_done = events[first + 3]["part"]
    item_done = events[first + 4]["item"]
    assert _citations(item_done) == part_done["annotations"] == [a["annotation"] for a in added]
    assert _citations(events[-1]["response"]["output"][-1]) == part_done["annotations"]


def test_message_before_code_cites_nothing_and_last_cites_the_rest(
    fake_server: LiveServer, engine: FakeEngine
) -> None:
    before = [ev for ev in say("I will write out.csv.") if not isinstance(ev, Finish)]
    engine.reset(before + code_call(WRITE), say("Done."))
    events = raw_stream(fake_server, {"model": MODEL, "input": "w", "tools": [{"type": "code_interpreter"}]})
    messages = [it for it in events[-1]["response"]["output"] if it["type"] == "message"]
    assert _citations(messages[0]) == []  # the files did not exist yet
    assert [(a["filename"], a["start_index"]) for a in _citations(messages[1])] == [
        ("out.csv", 5),
        ("plot.png", 5),
    ]


def test_sdk_stream_helper_matches_retrieve_with_citations(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(code_call(WRITE), say(ANSWER))
    with client.responses.stream(model=MODEL, input="w", tools=[{"type": "code_interpreter"}]) as stream:
        seen = [e.type for e in stream]
        final = stream.get_final_response()
    assert seen.count("response.output_text.annotation.added") == 2
    assert len(final.output[1].content[0].annotations) == 2  # type: ignore[union-attr]
    assert _plain(final) == _plain(client.responses.retrieve(final.id))

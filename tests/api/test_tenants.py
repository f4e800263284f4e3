"""Projects kept apart: each API key of a keys file belongs to a project, and another project's responses,
conversations and containers are 404 exactly as missing ones (a real server, the real `openai` SDK)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter, code_call, say
from tests.support.keys import write_keys_file
from tests.support.serving import LiveServer
from vllm_responses import cli
from vllm_responses.api.auth import KeyRing, KeysFileError
from vllm_responses.config import Config
from vllm_responses.store.migrations import SQLITE_MIGRATIONS
from vllm_responses.store.sqlite import SQLiteStore

MODEL = "fake-model"
KEY_A = "sk-proj-a-0123456789abcdef0123456789"
KEY_B = "sk-proj-b-0123456789abcdef0123456789"  # given in the keys file as its sha256
KEY_DEFAULT = "sk-default-0123456789abcdef0123456789"  # --api-key: project "default"


def _keys_file(path: Path) -> str:
    entries = [
        {"key": KEY_A, "project": "proj_a", "name": "alice"},
        {"sha256": hashlib.sha256(KEY_B.encode()).hexdigest(), "project": "proj_b", "name": "bob"},
    ]
    return write_keys_file(path, entries)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("tenants")
    config = Config(
        api_key=KEY_DEFAULT, api_keys_file=_keys_file(root / "keys.json"), code_interpreter_timeout=5.0
    )
    live = LiveServer(config, FakeEngine(), FakeInterpreter(max_containers=100), db=str(root / "r.db"))
    yield live.start()
    live.stop()


def _sdk(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30)


@pytest.fixture
def a(server: LiveServer) -> openai.OpenAI:
    return _sdk(server, KEY_A)


@pytest.fixture
def b(server: LiveServer) -> openai.OpenAI:
    return _sdk(server, KEY_B)


@pytest.fixture
def engine(server: LiveServer) -> FakeEngine:
    fake: FakeEngine = server.engine
    fake.reset()
    return fake


def _missing(call: object) -> None:
    """`call()` is answered 404 `not_found`, as for an id that does not exist."""
    with pytest.raises(openai.NotFoundError) as caught:
        call()  # type: ignore[operator]
    error = caught.value.body
    assert isinstance(error, dict) and error.get("type") == "invalid_request_error", error


def test_unknown_or_missing_key_is_401(server: LiveServer) -> None:
    with pytest.raises(openai.AuthenticationError):
        _sdk(server, "sk-nobody-0123456789").models.list()
    r = httpx.get(server.base_url + "/v1/models", timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert [m.id for m in _sdk(server, KEY_B).models.list()] == [MODEL]  # a key given by its hash
    assert [m.id for m in _sdk(server, KEY_DEFAULT).models.list()] == [MODEL]  # --api-key beside the file


def test_responses_of_another_project_are_not_found(
    a: openai.OpenAI, b: openai.OpenAI, engine: FakeEngine, server: LiveServer
) -> None:
    mine = a.responses.create(model=MODEL, input=[{"type": "message", "role": "user", "content": "hi"}])
    item_id = a.responses.input_items.list(mine.id).data[0].id
    assert a.responses.retrieve(mine.id).id == mine.id
    _missing(lambda: b.responses.retrieve(mine.id))
    _missing(lambda: b.responses.input_items.list(mine.id))
    _missing(lambda: b.responses.cancel(mine.id))
    _missing(lambda: b.responses.delete(mine.id))
    _missing(lambda: b.responses.create(model=MODEL, input="go on", previous_response_id=mine.id))
    _missing(
        lambda: b.responses.create(model=MODEL, input=[{"type": "item_reference", "id": item_id}])  # type: ignore[list-item]
    )
    streamed = httpx.get(
        f"{server.base_url}/v1/responses/{mine.id}",
        params={"stream": "true"},
        headers={"Authorization": f"Bearer {KEY_B}"},
        timeout=10,
    )
    assert streamed.status_code == 404 and streamed.json()["error"]["code"] == "not_found"
    # still A's, whole: nothing B tried touched it
    assert a.responses.retrieve(mine.id).status == "completed"
    assert a.responses.create(model=MODEL, input="go on", previous_response_id=mine.id).status == "completed"
    a.responses.delete(mine.id)


def test_background_response_of_another_project_is_not_found_while_running(
    a: openai.OpenAI, b: openai.OpenAI, engine: FakeEngine
) -> None:
    engine.reset(say("slow " * 50), delay=0.05)
    running = a.responses.create(model=MODEL, input="hi", background=True)
    _missing(lambda: b.responses.retrieve(running.id))
    _missing(lambda: b.responses.cancel(running.id))
    _missing(lambda: b.responses.delete(running.id))
    assert a.responses.cancel(running.id).status == "cancelled"  # A's cancel still works


def test_conversations_of_another_project_are_not_found(a: openai.OpenAI, b: openai.OpenAI) -> None:
    conv = a.conversations.create(
        items=[{"type": "message", "role": "user", "content": "secret"}], metadata={"who": "a"}
    )
    item_id = a.conversations.items.list(conv.id).data[0].id
    _missing(lambda: b.conversations.retrieve(conv.id))
    _missing(lambda: b.conversations.update(conv.id, metadata={"who": "b"}))
    _missing(lambda: b.conversations.delete(conv.id))
    _missing(lambda: b.conversations.items.list(conv.id))
    _missing(lambda: b.conversations.items.retrieve(item_id, conversation_id=conv.id))
    _missing(lambda: b.conversations.items.delete(item_id, conversation_id=conv.id))
    _missing(
        lambda: b.conversations.items.create(
            conv.id, items=[{"type": "message", "role": "user", "content": "inject"}]
        )
    )
    _missing(lambda: b.responses.create(model=MODEL, input="tell", conversation=conv.id))
    assert a.conversations.retrieve(conv.id).metadata == {"who": "a"}
    assert [it.id for it in a.conversations.items.list(conv.id).data] == [item_id]
    a.conversations.delete(conv.id)


def test_containers_and_files_of_another_project_are_not_found(a: openai.OpenAI, b: openai.OpenAI) -> None:
    cid = a.containers.create(name="a-box").id
    up = a.containers.files.create(cid, file=("secret.txt", b"a's data"))
    theirs = b.containers.create(name="b-box").id
    assert cid in [c.id for c in a.containers.list()] and theirs not in [c.id for c in a.containers.list()]
    assert [c.id for c in b.containers.list()] == [theirs]  # only its own
    _missing(lambda: b.containers.retrieve(cid))
    _missing(lambda: b.containers.files.list(cid))
    _missing(lambda: b.containers.files.retrieve(up.id, container_id=cid))
    _missing(lambda: b.containers.files.content.retrieve(up.id, container_id=cid))
    _missing(lambda: b.containers.files.create(cid, file=("planted.txt", b"b's")))
    _missing(lambda: b.containers.files.delete(up.id, container_id=cid))
    _missing(lambda: b.containers.delete(cid))
    assert [f.path for f in a.containers.files.list(cid)] == ["/mnt/data/secret.txt"]
    assert a.containers.files.content.retrieve(up.id, container_id=cid).read() == b"a's data"
    a.containers.delete(cid)
    b.containers.delete(theirs)


def test_code_interpreter_never_runs_in_another_projects_container(
    a: openai.OpenAI, b: openai.OpenAI, engine: FakeEngine, server: LiveServer
) -> None:
    interp: FakeInterpreter = server.interpreter
    cid = a.containers.create(name="a-box").id
    engine.reset(code_call("print('from b')"), say("Done."))
    _missing(
        lambda: b.responses.create(
            model=MODEL, input="run", tools=[{"type": "code_interpreter", "container": cid}]
        )
    )
    # An earlier code call naming A's container, sent back as input: B's code goes to a new container.
    earlier = {
        "type": "code_interpreter_call",
        "id": "ci_planted",
        "code": "print(1)",
        "container_id": cid,
        "outputs": [],
        "status": "completed",
    }
    engine.reset(code_call("print('from b')"), say("Done."))
    resp = b.responses.create(
        model=MODEL,
        input=[earlier, {"type": "message", "role": "user", "content": "run"}],  # type: ignore[list-item]
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
    )
    used = resp.output[0].container_id  # type: ignore[union-attr]
    assert used != cid and used in [c.id for c in b.containers.list()]
    assert cid not in [c for c, _code in interp.executions] and interp.pins[cid] == 0
    assert cid in [c.id for c in a.containers.list()]  # not evicted, not deleted
    a.containers.delete(cid)


def test_listing_shows_only_own_containers_to_the_default_project(
    a: openai.OpenAI, server: LiveServer
) -> None:
    cid = a.containers.create(name="a-only").id
    assert cid not in [c.id for c in _sdk(server, KEY_DEFAULT).containers.list()]
    a.containers.delete(cid)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "cannot be read as JSON"),
        ('{"keys": []}', "at least one key"),
        ('{"keys": [{"key": "K"}]}', "'project'"),
        (
            '{"keys": [{"key": "K", "sha256": "ab", "project": "p"}]}',
            "exactly one of",
        ),
        ('{"keys": [{"key": "K", "project": "p", "rpm": -1}]}', "'rpm'"),
        (
            '{"keys": [{"key": "K", "project": "p", "role": "admin"}]}',
            "unknown field",
        ),
        (
            '{"keys": [{"key": "K", "project": "p"}, {"key": "K", "project": "q"}]}',
            "repeats",
        ),
    ],
)
def test_a_malformed_keys_file_stops_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    path = tmp_path / "keys.json"
    path.write_text(text.replace('"K"', json.dumps(KEY_A)))  # "K": a key long enough
    path.chmod(0o600)
    with pytest.raises(KeysFileError, match=says):
        KeyRing.from_config(Config(api_keys_file=str(path)))
    assert cli.main(["serve", "--api-keys-file", str(path)]) == 2
    assert says.strip("'") in capsys.readouterr().err


def test_rows_kept_before_projects_become_project_default(tmp_path: Path) -> None:
    db = str(tmp_path / "v4.db")
    response = {"id": "resp_old", "object": "response", "status": "completed", "output": [], "model": MODEL}
    item = {"id": "msg_old", "type": "message", "role": "user", "content": "kept"}
    with sqlite3.connect(db) as conn:  # a database at schema version 4, with a response and a conversation
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
        for version, script in enumerate(SQLITE_MIGRATIONS[:4], start=1):
            conn.executescript(script)
            conn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))
        row = ("resp_old", time.time(), "completed", 0, json.dumps(response), json.dumps([item]), "[]")
        conn.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        conn.execute(
            "INSERT INTO conversations VALUES (?, ?, ?, ?)", ("conv_old", time.time(), time.time(), "{}")
        )
    root = tmp_path / "keys"
    root.mkdir()
    config = Config(api_key=KEY_DEFAULT, api_keys_file=_keys_file(root / "keys.json"))
    live = LiveServer(config, FakeEngine(), None, db=db).start()
    try:
        default, other = _sdk(live, KEY_DEFAULT), _sdk(live, KEY_A)
        assert default.responses.retrieve("resp_old").id == "resp_old"
        assert default.conversations.retrieve("conv_old").id == "conv_old"
        _missing(lambda: other.responses.retrieve("resp_old"))
        _missing(lambda: other.conversations.retrieve("conv_old"))
    finally:
        live.stop()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT project FROM responses").fetchall() == [("default",)]
        assert conn.execute("SELECT project FROM conversations").fetchall() == [("default",)]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_the_store_keeps_each_rows_project(tmp_path: Path, backend: str) -> None:
    from vllm_responses.store.base import StoredConversation, StoredResponse
    from vllm_responses.store.memory import MemoryStore

    store = MemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "s.db")
    await store.open()
    item = {"id": "msg_1", "type": "message", "role": "user", "content": "x"}
    record = StoredResponse(
        "resp_1", {"id": "resp_1", "status": "completed", "output": []}, [item], [item], False, 1.0, "proj_a"
    )  # type: ignore[typeddict-item]
    await store.save(record)
    await store.create_conversation(StoredConversation("conv_1", 1.0, {}, "proj_a"), [])
    got = await store.get("resp_1")
    assert got is not None and got.project == "proj_a"
    conv = await store.get_conversation("conv_1")
    assert conv is not None and conv.project == "proj_a"
    assert await store.find_item("msg_1", "proj_a") == item
    assert await store.find_item("msg_1", "proj_b") is None and await store.find_item("msg_1") is None
    await store.aclose()


def test_websocket_create_cannot_continue_another_projects_response(
    a: openai.OpenAI, server: LiveServer
) -> None:
    from websockets.sync.client import connect

    mine = a.responses.create(model=MODEL, input="hi")
    url = f"ws://127.0.0.1:{server.port}/v1/responses"
    with connect(url, open_timeout=10, additional_headers={"Authorization": f"Bearer {KEY_B}"}) as ws:
        ws.send(
            json.dumps(
                {"type": "response.create", "model": MODEL, "input": "x", "previous_response_id": mine.id}
            )
        )
        err = json.loads(ws.recv(timeout=10))
    assert err["type"] == "error" and err["status"] == 404
    assert err["error"]["code"] == "previous_response_not_found"
    with connect(url, open_timeout=10, additional_headers={"Authorization": f"Bearer {KEY_A}"}) as ws:
        ws.send(
            json.dumps(
                {"type": "response.create", "model": MODEL, "input": "x", "previous_response_id": mine.id}
            )
        )
        assert json.loads(ws.recv(timeout=10))["type"] == "response.created"  # its own project's: fine


def test_project_keys_do_not_open_the_ops(tmp_path: Path) -> None:
    """With a keys file, a project's key is a tenant's: `/metrics` and `/ready`'s detail stay closed to every
    project key (and with no operator key, to everyone), and open to the operator key only."""
    keys = _keys_file(tmp_path / "keys.json")
    for operator in (None, "sk-operator-0123456789"):
        live = LiveServer(Config(api_keys_file=keys, operator_key=operator), FakeEngine(), FakeInterpreter())
        live.start()
        try:
            for key in ("", KEY_A, KEY_B):
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                assert httpx.get(live.base_url + "/metrics", headers=headers).status_code == 401
                assert "checks" not in httpx.get(live.base_url + "/ready", headers=headers).json()
            if operator:
                headers = {"Authorization": f"Bearer {operator}"}
                assert httpx.get(live.base_url + "/metrics", headers=headers).status_code == 200
                assert "checks" in httpx.get(live.base_url + "/ready", headers=headers).json()
        finally:
            live.stop()

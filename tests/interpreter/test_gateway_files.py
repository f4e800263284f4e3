"""Files of the Files API in a real sandbox (Deno + Pyodide; the fake engine writes the code): a code interpreter's
`auto` container made with `file_ids`, and a container made with `file_ids` through the Containers API, hold the
files in /mnt/data, where Python reads them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.fakes import FakeEngine, code_call, say
from tests.support.sandbox_service import pool_gateway
from tests.support.serving import LiveServer

pytestmark = pytest.mark.sandbox

MODEL = "fake-model"
OUTPUTS: list[Any] = ["code_interpreter_call.outputs"]
READ = "import hashlib\nb = open('/mnt/data/{name}', 'rb').read()\nprint(len(b), hashlib.sha256(b).hexdigest()[:12])"


@pytest.fixture(scope="module")
def server(dist_dir: Path) -> Iterator[LiveServer]:
    live = pool_gateway(dist_dir, max_workers=2, code_interpreter_timeout=60)
    yield live
    live.stop()


def _printed(response: Any) -> str:
    call = next(it for it in response.output if it.type == "code_interpreter_call")
    return "".join(o.logs for o in call.outputs or [] if o.type == "logs")


def test_code_reads_files_copied_from_file_ids(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0, timeout=280)
    data = bytes(range(256)) * 5000  # 1.28 MB: more than one chunk in the store and in the sandbox
    file = client.files.create(file=("blob.bin", data), purpose="assistants")
    expected = f"{len(data)} {hashlib.sha256(data).hexdigest()[:12]}\n"

    engine: FakeEngine = server.engine
    engine.reset(code_call(READ.format(name="blob.bin")), say("Read."))
    tools: Any = [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": [file.id]}}]
    done = client.responses.create(model=MODEL, input="Read it", tools=tools, include=OUTPUTS)
    assert _printed(done) == expected

    box = client.containers.create(name="with a file", file_ids=[file.id])
    try:
        engine.reset(code_call(READ.format(name="blob.bin")), say("Read."))
        named: Any = [{"type": "code_interpreter", "container": box.id}]
        again = client.responses.create(model=MODEL, input="Read it", tools=named, include=OUTPUTS)
        assert _printed(again) == expected
    finally:
        client.containers.delete(box.id)

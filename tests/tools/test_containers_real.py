"""Containers, files, citations and input_tokens with real parts: vLLM (tiny model), Deno + Pyodide, the SDK.

The tiny model's output is forced with the `structured_outputs` extension (see test_e2e_real.py), so the
code it runs and the answer it gives are exact; the sandbox, files and token counts are the real ones.
"""

from __future__ import annotations

import openai
import pytest

from tests.support.real import TINY as MODEL
from tests.support.real import exactly, hermes_call

pytestmark = [pytest.mark.engine, pytest.mark.sandbox]


def test_written_file_is_cited_and_downloadable(real_client: openai.OpenAI) -> None:
    code = "import csv\nwith open('/mnt/data/out.csv', 'w', newline='') as f:\n    csv.writer(f).writerows([['n', 'sq'], [3, 9]])"
    answer = "The table is in out.csv."
    with real_client.responses.stream(
        model=MODEL,
        input="Write a table.",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        extra_body={"structured_outputs": [exactly(hermes_call(code)), exactly(answer)]},
    ) as stream:
        added = [e.annotation for e in stream if e.type == "response.output_text.annotation.added"]
        final = stream.get_final_response()
    call, message = final.output
    assert call.type == "code_interpreter_call" and call.status == "completed"
    assert message.type == "message" and final.output_text == answer
    (cite,) = message.content[0].annotations  # type: ignore[union-attr]
    assert [a.model_dump() for a in added] == [cite.model_dump()]  # type: ignore[union-attr]
    assert cite.type == "container_file_citation" and cite.container_id == call.container_id
    assert cite.filename == "out.csv" and answer[cite.start_index : cite.end_index] == "out.csv"
    assert real_client.responses.retrieve(final.id).output[1].content[0].annotations == [cite]  # type: ignore[union-attr]
    data = real_client.containers.files.content.retrieve(cite.file_id, container_id=cite.container_id).read()
    assert data.replace(b"\r\n", b"\n") == b"n,sq\n3,9\n"
    meta = real_client.containers.files.retrieve(cite.file_id, container_id=cite.container_id)
    assert meta.path == "/mnt/data/out.csv" and meta.source == "assistant" and meta.bytes == len(data)


def test_uploaded_file_is_read_by_code_in_a_named_container(real_client: openai.OpenAI) -> None:
    container = real_client.containers.create(name="real-upload")
    try:
        up = real_client.containers.files.create(container.id, file=("in.csv", b"a,b\n1,2\n3,4\n"))
        assert up.path == "/mnt/data/in.csv" and up.source == "user"
        code = "import pandas as pd\nprint(int(pd.read_csv('/mnt/data/in.csv').b.sum()))"
        resp = real_client.responses.create(
            model=MODEL,
            input="Sum column b.",
            tools=[{"type": "code_interpreter", "container": container.id}],
            include=["code_interpreter_call.outputs"],
            extra_body={"structured_outputs": [exactly(hermes_call(code)), exactly("It is 6.")]},
        )
        call = resp.output[0]
        assert call.type == "code_interpreter_call" and call.container_id == container.id
        assert call.outputs is not None and call.outputs[0].logs == "6\n"  # type: ignore[union-attr]
        assert [f.path for f in real_client.containers.files.list(container.id).data] == ["/mnt/data/in.csv"]
        real_client.containers.files.delete(up.id, container_id=container.id)
        assert real_client.containers.files.list(container.id).data == []
    finally:
        real_client.containers.delete(container.id)
    with pytest.raises(openai.NotFoundError):
        real_client.containers.retrieve(container.id)


@pytest.mark.parametrize("with_tools", [False, True], ids=["plain", "code-tool"])
def test_input_tokens_equal_the_usage_of_a_one_call_response(
    real_client: openai.OpenAI, with_tools: bool
) -> None:
    kwargs: dict = {"input": "Say hi in two words.", "instructions": "You are terse."}
    if with_tools:
        kwargs["tools"] = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    counted = real_client.responses.input_tokens.count(model=MODEL, **kwargs).input_tokens
    resp = real_client.responses.create(
        model=MODEL, extra_body={"structured_outputs": exactly("Hi there.")}, **kwargs
    )
    assert resp.output_text == "Hi there." and len(resp.output) == 1  # one model call, so one prompt
    assert resp.usage is not None and counted == resp.usage.input_tokens
    assert counted > 10

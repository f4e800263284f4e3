"""The embedded default model (SmolLM2-135M-Instruct, CPU) end to end: it writes code, the sandbox runs it,
and it answers from the output. A 135M model's answers are not a measure of quality: the test asserts the
lifecycle and that the printed output went back to the model, at temperature 0."""

from __future__ import annotations

import argparse
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import openai
import pytest

from tests.context.test_compaction import validate_compacted
from tests.support.serving import LiveServer
from tests.support.wire import validate_response
from vllm_responses.config import Config
from vllm_responses.engine.models import repo_root
from vllm_responses.protocol.compaction import open_summary
from vllm_responses.store.memory import MemoryStore

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]

MODEL = "SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def default_server() -> Iterator[LiveServer]:
    from interpreter_service.pool import PoolConfig, WorkerPool
    from vllm_responses.engine.args import add_engine_cli_args, engine_args_from_namespace
    from vllm_responses.engine.models import default_model_path
    from vllm_responses.engine.vllm import VLLMEngine

    path = default_model_path()

    @asynccontextmanager
    async def opener(cfg: Config) -> AsyncIterator[tuple[Any, Any, Any]]:
        async with AsyncExitStack() as stack:
            pool = await stack.enter_async_context(WorkerPool(PoolConfig(workers=1, timeout_s=20)))
            parser = add_engine_cli_args(argparse.ArgumentParser())
            args = engine_args_from_namespace(parser.parse_args(["--seed", "0"]), str(path))
            engine = await VLLMEngine.start(args, model_name=MODEL)
            stack.push_async_callback(engine.aclose)
            yield engine, pool, MemoryStore()

    server = LiveServer(Config(code_interpreter_timeout=20), None, None, opener=opener).start(timeout=900)
    yield server
    server.stop()


def test_default_model_runs_code_and_answers_from_it(default_server: LiveServer) -> None:
    client = openai.OpenAI(
        base_url=default_server.base_url + "/v1", api_key="unused", max_retries=0, timeout=600
    )
    with client.responses.stream(
        model=MODEL,
        input="Use Python to compute 123 * 456 and print the result.",
        tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        include=["code_interpreter_call.outputs"],
        temperature=0,
        max_output_tokens=256,
    ) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    validate_response(client.responses.retrieve(final.id).model_dump(mode="json", exclude_unset=True))
    assert "response.code_interpreter_call_code.delta" in kinds
    assert "response.code_interpreter_call.interpreting" in kinds
    calls = [it for it in final.output if it.type == "code_interpreter_call"]
    assert calls, f"the model wrote no code: {final.output}"
    first = calls[0]
    assert first.code and first.status in ("completed", "failed")
    assert first.outputs, "the sandbox's output is missing"
    logs = "".join(o.logs for o in first.outputs if o.type == "logs")
    assert logs.strip(), "the code printed nothing"
    # One code call per user message for this model (the prefill policy; a second only to retry code that
    # did not parse), then an answer that quotes what the code printed: the output reached the model.
    assert len(calls) <= 2 and final.status == "completed"
    assert final.output[-1].type == "message"
    printed = re.findall(r"\d{3,}", logs)
    assert printed and any(n in final.output_text for n in printed), (logs, final.output_text)
    print("code:", first.code, "\nlogs:", logs, "\nanswer:", final.output_text)


def test_the_readme_example_as_written(
    default_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's first Python block, run as it is written there (only its base_url pointed at this
    server): sampling is the embedded model's default (greedy, from its generation config), and the code's
    value reaches both the logs and the answer."""
    readme = (repo_root() / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S)
    assert block and "What is 2**100? Use Python." in block.group(1)
    code = block.group(1).replace("http://127.0.0.1:8000/v1", default_server.base_url + "/v1")
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102  # our own README's example
    response = namespace["response"]
    printed = capsys.readouterr().out
    assert response.temperature == 0 and response.status == "completed"
    calls = [it for it in response.output if it.type == "code_interpreter_call"]
    logs = "".join(o.logs for c in calls for o in c.outputs or [] if o.type == "logs")
    assert str(2**100) in logs, (calls, logs)
    assert str(2**100) in response.output_text, response.output_text
    assert calls[-1].code in printed  # the streamed code deltas, as the example prints them
    print("code:", [c.code for c in calls], "\nanswer:", response.output_text)


def test_default_model_compacts_a_conversation(default_server: LiveServer) -> None:
    """Smoke run of compaction with the default model writing the summary itself (nothing forced): the
    compacted context is smaller by `input_tokens` and a follow-up runs on it. Whether a 135M model keeps
    the fact is printed, not asserted."""
    client = openai.OpenAI(
        base_url=default_server.base_url + "/v1", api_key="unused", max_retries=0, timeout=600
    )
    chatter = "We talked about the weather, which was mild with some clouds and a little sun. "
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": "Hi, I am Ada. My locker code is 4417. " + chatter * 12},
        {"role": "assistant", "content": "Hello Ada, I will remember your locker code 4417. " + chatter * 12},
        {"role": "user", "content": "Tell me about the weather. " + chatter * 6},
        {"role": "assistant", "content": chatter * 6},
        {"role": "user", "content": "What is my locker code?"},
    ]
    raw = client.responses.with_raw_response.compact(model=MODEL, input=conversation)  # type: ignore[arg-type]
    compacted, body = raw.parse(), raw.http_response.json()
    validate_compacted(body)
    out = body["output"]
    assert [it["type"] for it in out] == ["message", "message", "message", "compaction"]
    summary = open_summary(out[-1]["encrypted_content"])
    assert summary.strip() and compacted.usage.output_tokens > 0

    def count(items: list[dict[str, Any]]) -> int:
        return client.responses.input_tokens.count(model=MODEL, input=items).input_tokens  # type: ignore[arg-type]

    before, after = count(conversation), count(out)
    assert after < before
    follow = client.responses.create(model=MODEL, input=out, temperature=0, max_output_tokens=64)  # type: ignore[arg-type]
    validate_response(client.responses.retrieve(follow.id).model_dump(mode="json", exclude_unset=True))
    assert follow.status in ("completed", "incomplete") and follow.output_text.strip()
    print(f"tokens {before} -> {after}\nsummary: {summary!r}\nanswer: {follow.output_text!r}")
    print("fact kept in the summary:", "4417" in summary, "| in the answer:", "4417" in follow.output_text)

"""The real engine (tiny model) with a shared sandbox service: the model's code call runs in the service."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.responses import ResponseCodeInterpreterToolCall

from tests.support.real import TINY, exactly, hermes_call, tiny_model_server
from tests.support.sandbox_service import SandboxService
from vllm_responses.config import Config

pytestmark = [pytest.mark.engine, pytest.mark.sandbox, pytest.mark.slow]
TOKEN = "real-s3cret"


@pytest.fixture(scope="module")
def service() -> Iterator[SandboxService]:
    svc = SandboxService(TOKEN, workers=1).start()
    yield svc
    svc.stop()


def test_the_models_code_runs_in_the_shared_service(service: SandboxService) -> None:
    config = Config(
        code_interpreter_timeout=20, code_interpreter_url=service.url, code_interpreter_token=TOKEN
    )
    server = tiny_model_server(config=config)
    try:
        sdk = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
        code = "import numpy as np\nprint(int(np.arange(5).sum()))"
        resp = sdk.responses.create(
            model=TINY,
            input="Sum 0..4.",
            tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
            include=["code_interpreter_call.outputs"],
            extra_body={"structured_outputs": [exactly(hermes_call(code)), exactly("It is 10.")]},
        )
        call = resp.output[0]
        assert isinstance(call, ResponseCodeInterpreterToolCall) and call.status == "completed"
        assert call.outputs is not None and call.outputs[0].logs == "10\n"  # type: ignore[union-attr]
        assert resp.status == "completed" and resp.output_text == "It is 10."
        listed = httpx.get(
            service.url + "/v1/containers", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        ).json()["data"]
        assert call.container_id in [c["id"] for c in listed]  # the service's container
    finally:
        server.stop()

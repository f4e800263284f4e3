"""Skills, refused wherever a request can give them, through the real `openai` SDK over the fake engine: a
container's (`POST /v1/containers`), a code interpreter tool's container's and a `shell` tool's local
environment's; an empty list is none, and accepted."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.support.fakes import FakeEngine, say
from tests.support.wire import validate_response

MODEL = "fake-model"
REFERENCE = {"type": "skill_reference", "skill_id": "skill_abc"}
INLINE = {
    "type": "inline",
    "name": "csv",
    "description": "Read CSVs.",
    "source": {"type": "base64", "data": "eA=="},
}
LOCAL = {"name": "csv", "description": "Read CSVs.", "path": "/home/me/skills/csv"}


def code_tool(skills: list[Any]) -> dict[str, Any]:
    return {"type": "code_interpreter", "container": {"type": "auto", "skills": skills}}


def shell_tool(skills: list[Any]) -> dict[str, Any]:
    return {"type": "shell", "environment": {"type": "local", "skills": skills}}


@pytest.mark.parametrize(
    "tools,param",
    [
        ([code_tool([REFERENCE])], "tools[0].container.skills"),
        ([{"type": "function", "name": "f"}, code_tool([INLINE])], "tools[1].container.skills"),
        ([shell_tool([LOCAL])], "tools[0].environment.skills"),
    ],
)
def test_skills_in_a_tool_are_a_400_naming_them(
    client: openai.OpenAI, engine: FakeEngine, tools: list[Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model=MODEL, input="hi", tools=tools)
    error = refused.value.body
    assert isinstance(error, dict) and error["param"] == param
    assert error["code"] == "unsupported_parameter" and "Skills are not supported" in error["message"]
    assert engine.requests == []
    # The count of input tokens reads the tools as a create does.
    with pytest.raises(openai.BadRequestError) as counted:
        client.responses.input_tokens.count(model=MODEL, input="hi", tools=tools)
    assert counted.value.body["param"] == param  # type: ignore[index]


def test_skills_of_a_container_are_refused_the_same_way(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.containers.create(name="x", skills=[REFERENCE])  # type: ignore[list-item]
    assert refused.value.body["param"] == "skills"  # type: ignore[index]
    assert "Skills are not supported" in refused.value.body["message"]  # type: ignore[index]


def test_no_skills_is_accepted(client: openai.OpenAI, engine: FakeEngine) -> None:
    engine.reset(say("Hello."))
    r = client.responses.create(model=MODEL, input="hi", tools=[code_tool([]), shell_tool([])])  # type: ignore[list-item]
    assert r.status == "completed" and r.output_text == "Hello."
    validate_response(r.model_dump(mode="json", exclude_unset=True, by_alias=True))
    # Echoed as the SDK types each tool: its code interpreter's container has no `skills`.
    assert [t.model_dump(exclude_unset=True) for t in r.tools] == [
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "shell", "environment": {"type": "local", "skills": []}},
    ]

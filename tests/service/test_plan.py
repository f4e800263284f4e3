"""`service/plan.py` on its own: what `Planner.resolve` and `Planner.plan` decide for a request (the tools,
limits and container it gets, the turns the model sees) and the requests they refuse, over the scripted
engine and the in-process interpreter, no server."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fakes import FakeEngine, FakeInterpreter
from vllm_responses.builder.response import ResponseBuilder
from vllm_responses.config import Config
from vllm_responses.engine.types import CODE_TOOL_NAME, ForcedTool, Message
from vllm_responses.protocol.errors import InvalidRequest, NotFound
from vllm_responses.protocol.requests import CreateResponseRequest
from vllm_responses.runs.run import Run
from vllm_responses.service.plan import Planner, Resolved
from vllm_responses.service.responses import ResponsesService
from vllm_responses.store.memory import MemoryStore
from vllm_responses.tools.code_interpreter import CodeContainer

MODEL = "fake-model"
AUTO = {"type": "code_interpreter", "container": {"type": "auto"}}
FN = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}


def request(**body: Any) -> CreateResponseRequest:
    return CreateResponseRequest.model_validate({"model": MODEL, "input": "hi", **body})


def planner(interpreter: FakeInterpreter | None = None, **config: Any) -> Planner:
    """The planner as the service wires it, over the scripted engine and a memory store."""
    return ResponsesService(Config(**config), FakeEngine(), interpreter, MemoryStore()).planner


async def resolved_plan(p: Planner, req: CreateResponseRequest) -> Any:
    resolved = await p.resolve(req)
    return (await p.plan(resolved.request, resolved)).agent


# --- resolve: what a request is refused for ---------------------------------------------------------------


async def test_a_model_not_served_is_a_404_naming_model() -> None:
    with pytest.raises(NotFound) as err:
        await planner().resolve(request(model="another-model"))
    assert (err.value.param, err.value.code) == ("model", "model_not_found")


async def test_a_served_model_name_other_than_the_engines_is_taken() -> None:
    p = planner(served_model_names=("alias", MODEL))
    assert p.model_names == ("alias", MODEL)
    resolved = await p.resolve(request(model="alias"))
    assert resolved.turns == [Message("user", "hi")]


async def test_the_code_interpreter_on_a_server_without_one_is_a_400_naming_tools() -> None:
    with pytest.raises(InvalidRequest) as err:
        await planner(None).resolve(request(tools=[AUTO]))
    assert (err.value.param, err.value.code) == ("tools", "unsupported_value")


async def test_a_previous_response_that_is_unknown_is_a_404() -> None:
    with pytest.raises(NotFound) as err:
        await planner().resolve(request(previous_response_id="resp_unknown"))
    assert (err.value.param, err.value.code) == ("previous_response_id", "previous_response_not_found")


async def test_a_previous_response_still_running_here_is_a_400() -> None:
    p = planner()
    running = Run(ResponseBuilder({"model": MODEL}, include_outputs=False), background=True)
    assert isinstance(p.runs, dict)
    p.runs[running.id] = running
    with pytest.raises(InvalidRequest, match="still in progress") as err:
        await p.resolve(request(previous_response_id=running.id))
    assert err.value.param == "previous_response_id"
    running.done.set()  # ended, but never stored: then it is not found
    with pytest.raises(NotFound):
        await p.resolve(request(previous_response_id=running.id))


async def test_a_forced_web_search_with_no_backend_is_a_400_naming_tool_choice() -> None:
    with pytest.raises(InvalidRequest, match="no search backend is configured") as err:
        await planner().resolve(request(tools=[{"type": "web_search"}], tool_choice={"type": "web_search"}))
    assert err.value.param == "tool_choice"


# --- resolve and plan: what a request gets ------------------------------------------------------------------


async def test_the_instructions_come_first_as_a_system_turn() -> None:
    agent = await resolved_plan(planner(), request(instructions="Be brief."))
    assert agent.turns == (Message("system", "Be brief."), Message("user", "hi"))


async def test_the_tools_offered_and_a_forced_function() -> None:
    agent = await resolved_plan(
        planner(FakeInterpreter()), request(tools=[AUTO, FN], tool_choice={"type": "function", "name": "f"})
    )
    assert [t.name for t in agent.tools] == [CODE_TOOL_NAME, "f"]
    assert agent.tool_choice == ForcedTool("f")
    agent = await resolved_plan(planner(), request(tools=[FN], tool_choice="none"))
    assert [t.name for t in agent.tools] == ["f"] and agent.tool_choice == "none"


async def test_the_limits_come_from_the_server_and_the_request() -> None:
    p = planner(FakeInterpreter(), max_turns=3, code_interpreter_timeout=7.0, concise_summary_over=99)
    agent = await resolved_plan(p, request(tools=[AUTO], max_output_tokens=50, max_tool_calls=2))
    assert (agent.max_turns, agent.code_timeout_s, agent.concise_summary_over) == (3, 7.0, 99)
    assert (agent.max_output_tokens, agent.max_tool_calls) == (50, 2)
    agent = await resolved_plan(p, request())
    assert (agent.max_output_tokens, agent.max_tool_calls) == (None, None)


async def test_the_request_sampling_reaches_the_plan() -> None:
    agent = await resolved_plan(planner(), request(temperature=0.2, stop="END", seed=7))
    assert (agent.sampling.temperature, agent.sampling.stop, agent.sampling.seed) == (0.2, ("END",), 7)


# --- the code interpreter's container -----------------------------------------------------------------------


async def test_no_code_interpreter_no_container() -> None:
    agent = await resolved_plan(planner(FakeInterpreter()), request(tools=[FN]))
    assert agent.container is None


async def test_an_auto_container_is_made_on_first_use_then_the_same_and_pinned() -> None:
    interp = FakeInterpreter()
    agent = await resolved_plan(planner(interp), request(tools=[AUTO]))
    assert isinstance(agent.container, CodeContainer) and interp.containers == {}  # none made yet
    first = await agent.container.get()
    assert await agent.container.get() == first and list(interp.containers) == [first]
    assert interp.infos[first].owner == "default" and interp.pins[first] == 1
    agent.container.release()
    assert interp.pins[first] == 0


async def test_an_auto_container_reuses_the_one_the_context_last_ran_in() -> None:
    interp = FakeInterpreter()
    p = planner(interp)
    earlier = (await interp.create_container(owner="default")).id
    req = request(tools=[AUTO])
    history = [{"type": "code_interpreter_call", "container_id": earlier}]
    resolved = Resolved(history, [], [Message("user", "hi")], [], None, None, req)
    agent = (await p.plan(req, resolved)).agent
    assert agent.container is not None and await agent.container.get() == earlier
    assert list(interp.containers) == [earlier]  # none made
    await interp.delete_container(earlier)  # gone before the next response's first use: a new one
    agent = (await p.plan(req, resolved)).agent
    assert agent.container is not None and await agent.container.get() != earlier


async def test_a_named_container_is_used_when_it_is_the_projects() -> None:
    interp = FakeInterpreter()
    p = planner(interp)
    mine = (await interp.create_container(owner="default")).id
    agent = await resolved_plan(p, request(tools=[{"type": "code_interpreter", "container": mine}]))
    assert agent.container is not None and await agent.container.get() == mine


async def test_a_named_container_of_another_project_is_a_404_naming_it() -> None:
    interp = FakeInterpreter()
    p = planner(interp)
    theirs = (await interp.create_container(owner="another-project")).id
    req = request(tools=[FN, {"type": "code_interpreter", "container": theirs}])
    with pytest.raises(NotFound) as err:
        await resolved_plan(p, req)
    assert err.value.param == "tools[1].container"


async def test_an_auto_container_naming_files_with_no_files_api_is_a_404_naming_the_id() -> None:
    req = request(tools=[{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-x"]}}])
    with pytest.raises(NotFound) as err:
        await resolved_plan(planner(FakeInterpreter()), req)
    assert err.value.param == "tools[0].container.file_ids[0]"

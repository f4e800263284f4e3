"""Prompt rendering with real chat templates (tiny model's tool-aware one; a ChatML one without tools)."""

from __future__ import annotations

import json

import pytest

from vllm_responses.engine.parsers.base import get_parser
from vllm_responses.engine.prompt import (
    CODE_PREFILL,
    TemplateCaps,
    choose_parser,
    code_retry_due,
    probe_template,
    render_prompt,
    should_prefill_code,
    turns_to_messages,
)
from vllm_responses.engine.types import (
    ForcedTool,
    GenerateRequest,
    Message,
    ToolCall,
    ToolResult,
    ToolSpec,
    code_tool_spec,
)
from vllm_responses.engine.verbosity import VERBOSITY_NOTES

# SmolLM2-135M-Instruct's template (ChatML, no tools section, no tool role).
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
    "trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CODE = code_tool_spec()
GEN = "<|im_start|>assistant\n"
CALL = ToolCall("c1", "python", json.dumps({"code": "print(6*7)"}))
RESULT = ToolResult("c1", "python", "42")


@pytest.fixture(scope="module")
def tool_tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


@pytest.fixture(scope="module")
def chatml_tok(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.chat_template = CHATML
    return tok


def test_probe(tool_tok, chatml_tok):
    assert probe_template(tool_tok) == TemplateCaps(tools_section=True, tool_calls=True)
    assert probe_template(chatml_tok) == TemplateCaps(tools_section=False, tool_calls=False)


def test_parser_choice(tool_tok):
    assert choose_parser("pythonic", tool_tok.chat_template, "m") == "pythonic"
    assert choose_parser(None, tool_tok.chat_template, "tiny") == "hermes"
    assert choose_parser(None, CHATML, "SmolLM2-135M-Instruct") == "markdown_code"


def test_tool_role_template(tool_tok):
    turns = (Message("developer", "be brief"), Message("user", "6*7?"), CALL, RESULT)
    request = GenerateRequest("r", turns, tools=(CODE,))
    prompt = render_prompt(tool_tok, request, probe_template(tool_tok), get_parser("hermes")())
    assert prompt.startswith("<|im_start|>system\nbe brief\n\n# Tools")
    assert '"name": "python"' in prompt.split("<tools>")[2].split("</tools>")[0]
    assert '<tool_call>\n{"name": "python", "arguments": {"code": "print(6*7)"}}\n</tool_call>' in prompt
    assert prompt.endswith("<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n" + GEN)


def test_no_tool_role_folds_calls_and_results(chatml_tok):
    request = GenerateRequest("r", (Message("user", "6*7?"), CALL, RESULT), tools=(CODE,))
    parser = get_parser("markdown_code")()
    prompt = render_prompt(chatml_tok, request, probe_template(chatml_tok), parser, CODE_PREFILL)
    assert "```python code block" in prompt.split("<|im_end|>")[0]  # the hint in the system turn
    assert f"<|im_start|>assistant\n{parser.render_call(CALL)}<|im_end|>" in prompt
    assert f"<|im_start|>user\n{parser.render_result(RESULT)}<|im_end|>\n{GEN}```python\n" in prompt
    assert prompt.endswith("<|im_start|>assistant\n" + CODE_PREFILL)


def test_a_template_without_tools_gets_the_hint_and_one_worked_example(chatml_tok):
    parser = get_parser("markdown_code")()
    turns = (Message("developer", "be brief"), Message("user", "2**10?"))
    prompt = render_prompt(
        chatml_tok, GenerateRequest("r", turns, tools=(CODE,)), TemplateCaps(False, False), parser
    )
    example = (
        "<|im_start|>user\nWhat is 6 * 7? Use Python.<|im_end|>\n"
        "<|im_start|>assistant\n```python\nprint(6 * 7)\n```<|im_end|>\n"
        f"<|im_start|>user\n{parser.render_result(ToolResult('x', 'python', '42'))}<|im_end|>\n"
        "<|im_start|>assistant\n6 * 7 is 42.<|im_end|>\n"
    )
    system = "<|im_start|>system\nbe brief\n\nYou can run Python code"
    assert prompt.startswith(system) and "Print the result with print()." in prompt.split("<|im_end|>")[0]
    assert prompt.endswith(example + "<|im_start|>user\n2**10?<|im_end|>\n" + GEN)  # after the system turn
    off = GenerateRequest("r", turns, tools=(CODE,), tool_choice="none")  # no tools offered: neither
    assert "6 * 7" not in render_prompt(chatml_tok, off, TemplateCaps(False, False), parser)
    native = render_prompt(
        chatml_tok, GenerateRequest("r", turns, tools=(CODE,)), TemplateCaps(True, True), parser
    )
    assert "6 * 7" not in native  # a template with a tools section shows the tools its own way


def test_folding_merges_adjacent_calls_and_results():
    parser = get_parser("hermes")()
    turns = (Message("user", "u"), Message("assistant", "let me run"), CALL, CALL, RESULT, RESULT)
    msgs = turns_to_messages(turns, TemplateCaps(False, False), parser)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"] == "let me run\n" + parser.render_call(CALL) + "\n" + parser.render_call(CALL)
    assert msgs[2]["content"] == parser.render_result(RESULT) + "\n" + parser.render_result(RESULT)
    native = turns_to_messages(turns, TemplateCaps(True, True), parser)
    assert [m["role"] for m in native] == ["user", "assistant", "tool", "tool"]
    assert native[1]["content"] == "let me run" and len(native[1]["tool_calls"]) == 2
    assert native[1]["tool_calls"][0]["function"]["arguments"] == {"code": "print(6*7)"}


def test_prefill_policy():
    user = (Message("user", "hi"),)
    after_code = user + (CALL, RESULT)

    def prefill(turns, tools=(CODE,), choice="auto", md=True, policy=True):
        r = GenerateRequest("r", turns, tools=tools, tool_choice=choice)
        return should_prefill_code(r, markdown_format=md, policy=policy)

    assert prefill(user)
    assert not prefill(after_code)  # code already ran in this response
    assert prefill(after_code + (Message("user", "again"),))
    assert not prefill(user, policy=False)
    assert prefill(after_code, choice=ForcedTool("python"), policy=False)
    assert prefill(after_code, choice="required")
    assert not prefill(user, choice="none")
    assert not prefill(user, tools=())
    assert not prefill(user, md=False)


def test_code_that_does_not_parse_is_retried_once():
    user = (Message("user", "hi"),)
    bad = ToolResult(
        "c1", "python", '  File "<cell>", line 1\n    2**100 = x\n    ^^^^^^\nSyntaxError: cannot assign'
    )
    bad_again = ToolResult("c2", "python", "IndentationError: unexpected indent")
    runtime = ToolResult(
        "c1", "python", "Traceback (most recent call last):\nNameError: name 'x' is not defined"
    )
    call2 = ToolCall("c2", "python", json.dumps({"code": "2**100 = x"}))

    def due(*turns):
        return code_retry_due(GenerateRequest("r", user + turns, tools=(CODE,)))

    assert due(CALL, bad)
    assert not due(CALL, bad, call2, bad_again)  # one retry, then the model answers
    assert not due(CALL, runtime)  # it parsed: the model answers from the traceback
    assert not due(CALL, RESULT)
    assert not due(CALL, bad, Message("assistant", "sorry"), Message("user", "next"))  # a new question
    request = GenerateRequest("r", user + (CALL, bad), tools=(CODE,))
    assert should_prefill_code(request, markdown_format=True, policy=True)  # the retry is prefilled again
    assert not should_prefill_code(request, markdown_format=True, policy=False)


def test_a_forced_hermes_call_is_described_to_a_template_without_tools(chatml_tok):
    """A call forced as Hermes on a markdown-format model (it writes code cells only): the system turn names the
    tools and the exact shape the grammar holds the reply to, and no code example is shown."""
    trip = ToolSpec("trip", "Plan a trip.", {"type": "object", "properties": {"city": {"type": "string"}}})
    request = GenerateRequest(
        "r", (Message("user", "Go."),), tools=(CODE, trip), tool_choice=ForcedTool("trip")
    )
    prompt = render_prompt(
        chatml_tok, request, TemplateCaps(False, False), get_parser("markdown_code")(), forced=[trip]
    )
    system = prompt.split("<|im_end|>")[0]
    assert "Call one of these tools now" in system and '<tool_call>{"name": <tool name>' in system
    assert (
        '- trip: Plan a trip.\n  arguments: {"type": "object", "properties": {"city": {"type": "string"}}}'
        in system
    )
    assert "6 * 7" not in prompt and prompt.endswith("<|im_start|>user\nGo.<|im_end|>\n" + GEN)


def test_images_become_parts_where_the_template_shows_them(tool_tok):
    from vllm_responses.engine.prompt import TOOL_IMAGES_NOTE, prompt_images
    from vllm_responses.engine.types import Image

    red, blue = Image(b"r", "image/png"), Image(b"b", "image/png")
    parser = get_parser("hermes")()
    turns = (Message("user", "u", (red,)), CALL, ToolResult("c1", "python", "42", (blue,)))
    image, text = {"type": "image"}, {"type": "text", "text": "u"}
    # A text-only model's prompt leaves them out.
    assert turns_to_messages(turns, TemplateCaps(True, True), parser)[0]["content"] == "u"
    shown = turns_to_messages(turns, TemplateCaps(True, True, tool_images=True), parser, images=True)
    assert shown[0]["content"] == [image, text] and shown[2]["content"][0] == image
    # A tool turn that cannot show an image: a user turn after it does; no tool role: the folded turn does.
    after = turns_to_messages(turns, TemplateCaps(True, True), parser, images=True)
    assert after[2]["content"] == "42" and after[3]["content"] == [
        image,
        {"type": "text", "text": TOOL_IMAGES_NOTE},
    ]
    folded = turns_to_messages(turns, TemplateCaps(False, False), parser, images=True)
    assert folded[-1]["role"] == "user" and folded[-1]["content"][0] == image
    assert prompt_images(turns) == [red, blue]
    # The tiny text model's template renders a tool turn's content as text only: no image shown there.
    assert probe_template(tool_tok).tool_images is False


# A ChatML template that reads a `verbosity` variable (as a model trained with one would).
VERBOSE_CHATML = (
    "{% if verbosity is defined %}<|im_start|>system\nVerbosity: {{ verbosity }}<|im_end|>\n{% endif %}"
    + CHATML
)


def test_verbosity_is_a_note_in_the_system_turn_where_the_template_reads_no_variable(tool_tok, chatml_tok):
    """`text.verbosity` low / high: a note at the end of the system turn (or a new one); medium, the default:
    nothing added."""
    turns = (Message("developer", "be brief"), Message("user", "why is the sky blue?"))
    for tok in (tool_tok, chatml_tok):
        caps = probe_template(tok)
        assert not caps.verbosity
        parser = get_parser("hermes")()
        plain = render_prompt(tok, GenerateRequest("r", turns), caps, parser)
        for level, note in VERBOSITY_NOTES.items():
            prompt = render_prompt(tok, GenerateRequest("r", turns, verbosity=level), caps, parser)
            assert prompt.startswith(f"<|im_start|>system\nbe brief\n\n{note}<|im_end|>")
        assert render_prompt(tok, GenerateRequest("r", turns, verbosity="medium"), caps, parser) == plain
    alone = GenerateRequest("r", (Message("user", "hi"),), verbosity="low")
    prompt = render_prompt(chatml_tok, alone, probe_template(chatml_tok), get_parser("hermes")())
    assert prompt.startswith(f"<|im_start|>system\n{VERBOSITY_NOTES['low']}<|im_end|>")


def test_verbosity_is_the_template_variable_where_the_template_reads_one(chatml_tok):
    caps = probe_template(chatml_tok, VERBOSE_CHATML)
    assert caps.verbosity
    turns = (Message("user", "why is the sky blue?"),)
    for level in ("low", "medium", "high"):
        request = GenerateRequest("r", turns, verbosity=level)
        prompt = render_prompt(chatml_tok, request, caps, get_parser("hermes")(), template=VERBOSE_CHATML)
        assert prompt.startswith(f"<|im_start|>system\nVerbosity: {level}<|im_end|>")
        assert not any(note in prompt for note in VERBOSITY_NOTES.values())

"""Tiny REASONING test models: copies of the tiny model with a reasoning chat template of their own.

`THINK_TEMPLATE` is Qwen3's way of reasoning, cut down: the model thinks inside `<think>...</think>` before
it answers or calls (Hermes tool calls, as the tiny model's own template), `enable_thinking=False` prefills
an empty think block, and an assistant message's `reasoning_content` is rendered back inside its think
block. `EFFORT_TEMPLATE` is gpt-oss's way, in plain text (not harmony): a `Reasoning: low|medium|high` system
line from `reasoning_effort`, and earlier reasoning from an assistant message's `thinking`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.real import tiny_model_path_or_fail

__all__ = ["EFFORT_TEMPLATE", "THINK_TEMPLATE", "reasoning_tiny_model"]

_TOOLS = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n"
    "\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags.<|im_end|>\\n' }}"
    "{%- endif %}"
)

_CALLS = (
    "{%- for tool_call in message.tool_calls or [] %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + tool_call.name + \'", "arguments": \' }}'
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
)

_TOOL_RESULT = (
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
)

THINK_TEMPLATE = (
    _TOOLS + "{%- for message in messages %}"
    "{%- if message.role in ('user', 'system') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.reasoning_content is string and message.reasoning_content %}"
    "{{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{{- message.content or '' }}" + _CALLS + "{{- '<|im_end|>\\n' }}" + _TOOL_RESULT + "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)

EFFORT_TEMPLATE = (
    "{{- '<|im_start|>system\\nReasoning: ' + (reasoning_effort | default('medium')) + '<|im_end|>\\n' }}"
    + _TOOLS
    + "{%- for message in messages %}"
    "{%- if message.role in ('user', 'system') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.thinking %}{{- '<analysis>' + message.thinking + '</analysis>' }}{%- endif %}"
    "{{- message.content or '' }}" + _CALLS + "{{- '<|im_end|>\\n' }}" + _TOOL_RESULT + "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def reasoning_tiny_model(parent: Path, template: str = THINK_TEMPLATE, name: str = "tiny-think") -> Path:
    """A copy of the tiny model under `parent` whose chat template is `template`."""
    copy = parent / name
    shutil.copytree(tiny_model_path_or_fail(), copy)
    (copy / "chat_template.jinja").write_text(template)
    config_path = copy / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("chat_template", None)  # the .jinja file is the template
    config_path.write_text(json.dumps(config))
    return copy

"""Print the tables of parser names in docs/parsers.md (the path each name takes); `--write` updates the doc."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "parsers.md"
START, END = "<!-- parser-table: start (scripts/parser_table.py --write) -->", "<!-- parser-table: end -->"

TOOL_PATHS = {"ours": "ours", "vllm": "vLLM's parser through the adapter"}
REASONING_PATHS = {
    "think": "our `<think>` splitter (`ReasoningSplitter`)",
    "harmony": "the `harmony` tool parser's analysis channel",
    "vllm": "vLLM's parser through the adapter",
}
# Names whose format has a hand-written transcript in tests/engine/parsers/vllm_transcripts.py (through vLLM's parser).
TESTED_TOOL = {
    "hermes", "mistral", "deepseek_v3", "deepseek_v31", "qwen3_xml", "kimi_k2", "glm45", "glm47", "granite",
    "internlm", "xlam", "minimax_m2", "llama3_json", "pythonic", "phi4_mini_json",
}  # fmt: skip
TESTED_REASONING = {"deepseek_r1", "qwen3", "granite", "mistral"}
# Names that cannot be used in this installation, whatever the model (found by building each parser).
NOT_USABLE_HERE = {
    "cohere_command3": "not usable here: vLLM's parser needs the `cohere_melody` package, not installed",
    "cohere_command4": "not usable here: vLLM's parser needs the `cohere_melody` package, not installed",
    "hf": "only with a tokenizer whose config carries `response_template` metadata",
}


def table() -> str:
    sys.path.insert(0, str(DOC.parents[1]))
    from vllm_responses.engine.parser_names import (
        reasoning_parser_table,
        tool_parser_table,
        vllm_tool_parser_names,
    )

    vllm_names = set(vllm_tool_parser_names())
    head = "| path | vLLM's parser tested on a transcript | note |"
    lines = [f"| `--tool-call-parser` {head}", "|---|---|---|---|"]
    for name, route in tool_parser_table():
        path = TOOL_PATHS[route] + (
            " (vLLM has one of this name too)" if route == "ours" and name in vllm_names else ""
        )
        tested = "yes" if name in TESTED_TOOL else ""
        lines.append(f"| `{name}` | {path} | {tested} | {NOT_USABLE_HERE.get(name, '')} |")
    lines += ["", f"| `--reasoning-parser` {head}", "|---|---|---|---|"]
    for name, rroute in reasoning_parser_table():
        tested = "yes" if name in TESTED_REASONING else ""
        lines.append(f"| `{name}` | {REASONING_PATHS[rroute]} | {tested} | {NOT_USABLE_HERE.get(name, '')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true", help="replace the tables in docs/parsers.md")
    args = ap.parse_args()
    text = table()
    if not args.write:
        print(text)
        return 0
    doc = DOC.read_text()
    head, rest = doc.split(START, 1)
    _old, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

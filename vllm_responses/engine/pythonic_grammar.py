"""An EBNF grammar (xgrammar's dialect) for the keyword arguments of a pythonic call, `f(a=1, b="x")`, held to the
arguments' JSON schema: properties in schema order, required ones present, values Python literals of their type."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ANY_KWARGS", "kwargs_grammar", "py_literal"]

_BASE = r"""string ::= "\"" ([^"\\\n\r] | "\\" ([\"\\bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]))* "\""
integer ::= "-"? ("0" | [1-9] [0-9]*)
number ::= integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
value ::= string | number | "True" | "False" | "None" | list | dict
list ::= "[" (value (", " value)*)? "]"
dict ::= "{" (string ": " value (", " string ": " value)*)? "}"
kwarg ::= [a-zA-Z_] [a-zA-Z0-9_]* "=" value
"""
# Any keyword arguments with literal values (a schema without properties, or one not held).
ANY_KWARGS = 'root ::= "" | kwarg (", " kwarg)*\n' + _BASE
_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": '("True" | "False")'}


def py_literal(value: Any) -> str:
    """`value` (JSON data) as the Python literal `ast.literal_eval` reads back."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {py_literal(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _quote(text: str) -> str:
    return json.dumps(text)  # an EBNF string literal uses JSON's escapes


class _Rules:
    def __init__(self) -> None:
        self.rules: list[str] = []

    def add(self, body: str) -> str:
        name = f"r{len(self.rules)}"
        self.rules.append(f"{name} ::= {body}")
        return name

    def value(self, schema: Any, depth: int = 0) -> str:
        """A rule expression for a value matching `schema` (any literal where the schema says no more)."""
        if not isinstance(schema, dict) or depth > 8:
            return "value"
        if "const" in schema:
            return _quote(py_literal(schema["const"]))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return "(" + " | ".join(_quote(py_literal(v)) for v in schema["enum"]) + ")"
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return "(" + " | ".join(self.value(s, depth + 1) for s in schema[key]) + ")"
        kind = schema.get("type")
        if isinstance(kind, list) and kind:
            return "(" + " | ".join(self.value({**schema, "type": k}, depth + 1) for k in kind) + ")"
        if kind in _TYPES:
            return _TYPES[kind]
        if kind == "null":
            return '"None"'
        if kind == "array":
            item = self.value(schema.get("items"), depth + 1)
            return self.add(f'"[" ({item} (", " {item})*)? "]"')
        if kind == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
            pairs = self.fields(schema, lambda k: _quote(json.dumps(k) + ": "), depth)
            return self.add(f'"{{" {pairs} "}}"')
        if kind == "object":
            return "dict"
        return "value"

    def fields(self, schema: dict[str, Any], label: Any, depth: int) -> str:
        """The properties of an object schema in order, ", "-separated, the required ones present."""
        required = set(schema.get("required") or ())
        props = list(schema["properties"].items())
        start, rest = '""', '""'
        for key, sub in reversed(props):
            field = f"{label(key)} {self.value(sub, depth + 1)}"
            if key in required:
                start, rest = self.add(f"{field} {rest}"), self.add(f'", " {field} {rest}')
            else:
                start = self.add(f"{field} {rest} | {start}")
                rest = self.add(f'", " {field} {rest} | {rest}')
        return start


def kwargs_grammar(schema: dict[str, Any] | None) -> str:
    """The grammar of keyword arguments holding `schema` (an object schema with properties), else any."""
    if (
        not isinstance(schema, dict)
        or not isinstance(schema.get("properties"), dict)
        or not schema["properties"]
    ):
        return ANY_KWARGS
    rules = _Rules()
    root = rules.fields(schema, lambda k: _quote(f"{k}="), 0)
    return f"root ::= {root}\n" + "\n".join(rules.rules) + "\n" + _BASE

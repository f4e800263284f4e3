"""The docs read as a product: no paths outside the repository, no issue numbers, wrapped lines, live links."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
CODE_PACKAGES = ("vllm_responses", "interpreter_service", "scripts")

PROSE_MAX = 120
LINE_MAX = 400
OUTSIDE = re.compile(r"\.\./shared|/work/")
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/])#\d{2,}\b", re.IGNORECASE)
# [text](target) or [text]: target; images too. Targets with a scheme or a bare anchor are not files.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """Lines outside fenced code blocks, tables and generated blocks, numbered from 1."""
    fence: str | None = None
    generated = False  # between benchmarks.md's markers: written by scripts/bench_report.py, not wrapped
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith(("<!-- bench:begin -->", "<!-- bench:end -->")):
            generated = "begin" in stripped
            continue
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            fence = None if fence == marker else (fence or marker)
            continue
        if fence is None and not generated and not stripped.startswith("|"):
            yield number, line


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    return enumerate(path.read_text().splitlines(), 1)


def _comments(path: Path) -> Iterator[tuple[int, str]]:
    """A code file's comments and docstrings (Python) or comments (JavaScript), with their line numbers."""
    source = path.read_text()
    if path.suffix == ".py":
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc and node.body:
                    yield node.body[0].lineno, doc
    else:
        for match in re.finditer(r"//[^\n]*|/\*.*?\*/", source, re.DOTALL):
            yield source.count("\n", 0, match.start()) + 1, match.group()


def _code_files() -> list[Path]:
    files: list[Path] = []
    for package in CODE_PACKAGES:
        base = ROOT / package
        files += sorted(base.rglob("*.py")) + sorted(base.rglob("*.mjs")) + sorted(base.rglob("*.js"))
    return [f for f in files if "node_modules" not in f.parts]


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_no_path_outside_the_repository(doc: Path) -> None:
    found = [f"{n}: {line.strip()[:100]}" for n, line in _lines(doc) if OUTSIDE.search(line)]
    assert not found, f"{_name(doc)} names paths outside the repository:\n" + "\n".join(found)


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_no_issue_numbers_in_docs(doc: Path) -> None:
    found = [f"{n}: {m.group()}" for n, line in _lines(doc) for m in ISSUE.finditer(line)]
    assert not found, f"{_name(doc)} cites issue numbers:\n" + "\n".join(found)


def test_no_issue_numbers_in_code_comments() -> None:
    found = [
        f"{_name(path)}:{n}: {m.group()}"
        for path in _code_files()
        for n, comment in _comments(path)
        for m in ISSUE.finditer(comment)
    ]
    assert not found, "code comments cite issue numbers:\n" + "\n".join(found)


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_lines_are_wrapped(doc: Path) -> None:
    text = doc.read_text()
    long_prose = [f"{n} ({len(line)} chars)" for n, line in _prose(text) if len(line) > PROSE_MAX]
    too_long = [f"{n} ({len(line)} chars)" for n, line in _lines(doc) if len(line) > LINE_MAX]
    assert not long_prose, f"{_name(doc)}: prose lines over {PROSE_MAX} chars at " + ", ".join(long_prose)
    assert not too_long, f"{_name(doc)}: lines over {LINE_MAX} chars at " + ", ".join(too_long)


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_relative_links_point_at_files(doc: Path) -> None:
    broken = []
    for match in LINK.finditer(doc.read_text()):
        target = (match.group(1) or match.group(2)).split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue
        if not (doc.parent / target).exists():
            broken.append(target)
    assert not broken, f"{_name(doc)} links files that do not exist: " + ", ".join(broken)


def test_the_checks_find_what_they_look_for() -> None:
    text = "text\n```\n" + "x" * 200 + "\n```\n| " + "y" * 200 + " |\nend"
    assert list(_prose(text)) == [(1, "text"), (6, "end")]
    assert list(_prose("<!-- bench:begin -->\nz\n<!-- bench:end -->\nend")) == [(4, "end")]
    assert ISSUE.search("fixed in issue 37") and ISSUE.search("see #41") and ISSUE.search("Issue #5")
    assert not ISSUE.search("color #fff, &#39; and a/b#12 anchor")
    assert OUTSIDE.search("[notes](../shared/notes/style.md)") and OUTSIDE.search("/work/main/models")
    link = LINK.search("see [a](missing.md#part)")
    assert link is not None and link.group(1) == "missing.md#part"


def _architecture_sections() -> dict[str, set[str]]:
    """architecture.md's sections: each `## ` heading's text -> the names in the first cells of its tables."""
    sections: dict[str, set[str]] = {}
    heading = ""
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        if line.startswith("## "):
            heading = line
            sections[heading] = set()
        elif line.startswith("| `") and heading:
            sections[heading].update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return sections


def _modules(package: str) -> Iterator[Path]:
    """A package's modules (.py, and the sandbox's .mjs): sub-packages' `__init__.py` files are docstrings only."""
    root = ROOT / package
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".mjs") or "__pycache__" in path.parts or "static" in path.parts:
            continue
        if path.name == "__init__.py" and path.parent != root:
            continue
        yield path.relative_to(root)


def _listed(module: Path, names: set[str]) -> bool:
    """A module is listed by its path, its file name, or a folder above it (`parsers/`)."""
    return (
        str(module) in names
        or module.name in names
        or any(f"{parent}/" in names for parent in module.parents if str(parent) != ".")
    )


@pytest.mark.parametrize("package", ["vllm_responses", "interpreter_service"])
def test_architecture_lists_every_module(package: str) -> None:
    """Each module has a row in architecture.md, in its own package's section (`## `api/`` for api/routes.py)."""
    sections = _architecture_sections()
    missing = []
    for module in _modules(package):
        if package == "vllm_responses":
            top = module.parts[0] if len(module.parts) > 1 else None
            wanted = f"`{top}/`" if top else "The top of `vllm_responses/`"
        else:
            wanted = "`interpreter_service/`"
        names = set().union(*(n for heading, n in sections.items() if wanted in heading))
        inner = Path(*module.parts[1:]) if package == "vllm_responses" and len(module.parts) > 1 else module
        if not _listed(inner, names):
            missing.append(str(module))
    assert not missing, f"docs/architecture.md has no row for {package}'s {missing}"

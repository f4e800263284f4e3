"""Citations in a message's text: `container_file_citation` where it mentions a file the response's code
wrote, `url_citation` where it mentions the URL of a web search result, `file_citation` where it names the file
id of a file search result.

The rule (also in docs/api.md): every mention of a written file in an assistant message is cited, spanning
the longest of `sandbox:/mnt/data/<path>`, `/mnt/data/<path>`, `<path>` and the file's base name that the
text holds there; the base name must stand on its own (`out.csv` is not found in `about.csv` nor in
`out.csv2`). A file that no message of the response mentions is cited once at the end of the response's
last message, as a zero-width annotation (`start_index == end_index == len(text)`), so that clients can
still find every file the code produced. A search result is cited at each mention of its URL (docs/api.md
"Web search"). A file search result is cited at each mention of its file id (`file-...`, standing on its own:
not inside a longer id), the citation's `index` just after the mention (docs/api.md "File search"). Indexes
count Unicode code points.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from interpreter_service import DATA_DIR
from vllm_responses.protocol.items import ContainerFileCitation, FileCitation, UrlCitation

__all__ = [
    "FoundFile",
    "WebSource",
    "WrittenFile",
    "file_citations",
    "found_file_citations",
    "mentions",
    "url_citations",
]

_FOLDER = DATA_DIR + "/"


@dataclass(frozen=True)
class WrittenFile:
    container_id: str
    file_id: str
    path: str  # absolute, e.g. /mnt/data/report/out.csv

    @property
    def filename(self) -> str:
        return posixpath.basename(self.path)


@dataclass(frozen=True)
class WebSource:
    """A web search result the response's model was shown."""

    url: str
    title: str


@dataclass(frozen=True)
class FoundFile:
    """A file whose chunks a file search showed the response's model."""

    file_id: str
    filename: str


def _word(ch: str) -> bool:
    return bool(ch) and (ch.isalnum() or ch in "_-")


def mentions(text: str, path: str) -> list[tuple[int, int]]:
    """`(start, end)` of each mention of the file at `path` in `text`, in order."""
    name = posixpath.basename(path)
    if not name:
        return []
    rel = path[len(_FOLDER) :] if path.startswith(_FOLDER) else path.lstrip("/")
    prefixes = ["sandbox:" + _FOLDER + rel, _FOLDER + rel, rel]
    found: list[tuple[int, int]] = []
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        before = text[at - 1] if at else ""
        after = text[end] if end < len(text) else ""
        after_next = text[end + 1] if end + 1 < len(text) else ""
        standalone = not (_word(before) or before == ".") and not (
            _word(after) or (after == "." and _word(after_next))
        )
        if standalone:
            start = at
            for prefix in prefixes:  # longest first
                if text[:end].endswith(prefix):
                    start = end - len(prefix)
                    break
            found.append((start, end))
        at = text.find(name, at + 1)
    return found


def file_citations(
    text: str, files: Sequence[WrittenFile], *, cite_rest: bool, already_cited: Iterable[str] = ()
) -> list[ContainerFileCitation]:
    """The annotations of one message's text, ordered by position.

    `cite_rest`: this is the response's last message, so files not mentioned in it nor cited before
    (`already_cited` file ids) get a zero-width citation at its end.
    """
    spans: list[tuple[int, int, WrittenFile]] = []
    for f in files:
        spans += [(s, e, f) for s, e in mentions(text, f.path)]
    cited = set(already_cited) | {f.file_id for _, _, f in spans}
    if cite_rest:
        spans += [(len(text), len(text), f) for f in files if f.file_id not in cited]
    spans.sort(key=lambda s: (s[0], s[1]))
    return [
        {
            "type": "container_file_citation",
            "container_id": f.container_id,
            "file_id": f.file_id,
            "filename": f.filename,
            "start_index": s,
            "end_index": e,
        }
        for s, e, f in spans
    ]


def url_citations(text: str, sources: Sequence[WebSource]) -> list[UrlCitation]:
    """A `url_citation` at each mention of a search result's URL in `text` (a longer URL that holds a shorter
    one's text is cited as the longer), ordered by position."""
    spans: dict[int, tuple[int, WebSource]] = {}
    for source in sorted({s.url: s for s in sources}.values(), key=lambda s: len(s.url)):
        at = text.find(source.url)
        while at >= 0:
            spans[at] = (at + len(source.url), source)
            at = text.find(source.url, at + 1)
    return [
        {"type": "url_citation", "url": src.url, "title": src.title, "start_index": start, "end_index": end}
        for start, (end, src) in sorted(spans.items())
    ]


def found_file_citations(text: str, found: Sequence[FoundFile]) -> list[FileCitation]:
    """A `file_citation` at each mention of a found file's id in `text` (not inside a longer word), its `index`
    just after the mention, ordered by position."""
    cited: dict[int, FoundFile] = {}
    for f in {f.file_id: f for f in found}.values():
        at = text.find(f.file_id)
        while at >= 0:
            end = at + len(f.file_id)
            before = text[at - 1] if at else ""
            after = text[end] if end < len(text) else ""
            if not _word(before) and not _word(after):
                cited[end] = f
            at = text.find(f.file_id, at + 1)
    return [
        {"type": "file_citation", "file_id": f.file_id, "filename": f.filename, "index": index}
        for index, f in sorted(cited.items())
    ]

"""The citation rule of `citations.py`: which spans of a message cite which written file."""

from __future__ import annotations

import pytest

from vllm_responses.builder.citations import WrittenFile, file_citations, mentions

OUT = "/mnt/data/out.csv"


@pytest.mark.parametrize(
    "text,spans",
    [
        ("Saved to out.csv.", [(9, 16)]),
        ("See /mnt/data/out.csv", [(4, 21)]),
        ("[download](sandbox:/mnt/data/out.csv)", [(11, 36)]),
        ("out.csv and out.csv", [(0, 7), (12, 19)]),
        ("about.csv, out.csv2, my_out.csv, x.out.csv, out.csv.bak", []),
        ("(out.csv)", [(1, 8)]),
        ("", []),
    ],
)
def test_mentions(text: str, spans: list[tuple[int, int]]) -> None:
    assert mentions(text, OUT) == spans
    for s, e in spans:
        assert text[s:e].endswith("out.csv")


def test_nested_path_prefers_the_longest_mention() -> None:
    path = "/mnt/data/report/out.csv"
    assert mentions("in report/out.csv", path) == [(3, 17)]
    assert mentions("in sandbox:/mnt/data/report/out.csv", path) == [(3, 35)]
    assert mentions("just out.csv", path) == [(5, 12)]


def test_unmentioned_files_are_cited_at_the_end_of_the_last_message_only() -> None:
    a = WrittenFile("cntr_1", "cfile_a", "/mnt/data/a.png")
    b = WrittenFile("cntr_1", "cfile_b", "/mnt/data/b.csv")
    text = "Here is b.csv."
    assert [x["file_id"] for x in file_citations(text, [a, b], cite_rest=False)] == ["cfile_b"]
    cites = file_citations(text, [a, b], cite_rest=True)
    assert [(x["file_id"], x["start_index"], x["end_index"]) for x in cites] == [
        ("cfile_b", 8, 13),
        ("cfile_a", len(text), len(text)),
    ]
    assert cites[1] == {
        "type": "container_file_citation",
        "container_id": "cntr_1",
        "file_id": "cfile_a",
        "filename": "a.png",
        "start_index": 14,
        "end_index": 14,
    }
    # cited by an earlier message of the response: not cited again at the end
    assert file_citations("Done.", [a, b], cite_rest=True, already_cited={"cfile_a", "cfile_b"}) == []

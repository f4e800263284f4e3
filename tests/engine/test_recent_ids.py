"""`RecentIds`: a prompt tokenized once while it is among the last few, a fresh list each time, the oldest
forgotten first."""

from __future__ import annotations

import threading

from vllm_responses.engine.recent_ids import RecentIds


def counting() -> tuple[RecentIds, list[str]]:
    seen: list[str] = []

    def encode(text: str) -> list[int]:
        seen.append(text)
        return [ord(c) for c in text]

    return RecentIds(encode, kept=2), seen


def test_a_prompt_is_tokenized_once_while_it_is_kept() -> None:
    recent, seen = counting()
    first = recent.ids("ab")
    again = recent.ids("a" + "b")  # an equal text, another object
    assert first == again == [97, 98] and seen == ["ab"]
    again.append(0)  # the caller's own list
    assert recent.ids("ab") == [97, 98]


def test_the_least_recently_used_is_forgotten_first() -> None:
    recent, seen = counting()
    for text in ("a", "b", "a", "c", "a", "b"):
        recent.ids(text)
    assert seen == ["a", "b", "c", "b"]  # "b" was the oldest when "c" came; "a" stayed in use


def test_threads_share_it() -> None:
    recent, seen = counting()
    out: list[list[int]] = []
    threads = [threading.Thread(target=lambda: out.append(recent.ids("xyz"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [[120, 121, 122]] * 8 and 1 <= len(seen) <= 8

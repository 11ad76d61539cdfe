"""Time-aware ranking: a "when" question ranks the memory that says when above one that only
shares its words; any other question is ranked as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.index.temporal import asks_when, favour_times, holds_time

UNDATED = "The CI runners moved to arm64 machines"
DATED = "Last March the CI runners moved to arm64"
OTHER = "The arm64 images are cached on the runners"


@pytest.mark.parametrize(
    ("query", "when"),
    [
        ("When did we move the CI to arm64?", True),
        ("when was the last release", True),
        ("How long ago did Caroline move?", True),
        ("What year did we adopt Rust?", True),
        ("Do you remember when did we switch?", True),
        ("What CI runners do we use?", False),
        ("How do I release to production?", False),
        ("Say when you are done", False),
    ],
)
def test_asks_when(query: str, when: bool) -> None:
    assert asks_when(query) is when


@pytest.mark.parametrize(
    ("text", "dated"),
    [
        ("I went to the support group yesterday", True),
        ("We moved to Lisbon last March", True),
        ("The migration ran two weeks ago", True),
        ("Released 2.0 on 2024-05-01", True),
        ("We met on Friday", True),
        ("The meetup is in May", True),
        ("You may use the staging cluster", False),
        ("The frontend is written in TypeScript with React 19", False),
        ("We deploy the web app with make ship", False),
    ],
)
def test_holds_time(text: str, dated: bool) -> None:
    assert holds_time(text) is dated


def test_only_a_when_question_is_reordered() -> None:
    ranked = [("a", 0.9), ("b", 0.85), ("c", 0.1)]
    texts = {"a": UNDATED, "b": DATED, "c": OTHER}
    assert favour_times("What CI runners do we use?", ranked, texts.get) == ranked
    reordered = favour_times("When did we move the CI runners?", ranked, texts.get)
    assert [i for i, _ in reordered] == ["b", "a", "c"]
    assert favour_times("When?", [], texts.get) == []


def test_a_when_question_ranks_the_dated_memory_first(tmp_path: Path) -> None:
    """Through a real store (Tantivy and LanceDB on disk): the undated memory is the shorter, so
    by keywords alone it ranks first; asked "when", the dated one does, and asked anything
    else, the order is the keywords' own."""
    store = LongTermStore(tmp_path)
    for text in (UNDATED, DATED, OTHER):
        store.save(text, "ops")
    assert store.checkpoint()
    what = [h.entry.content for h in store.search("Which CI runners moved to arm64?")]
    assert what[0] == UNDATED
    when = [h.entry.content for h in store.search("When did the CI runners move to arm64?")]
    assert when[0] == DATED
    assert set(when) == set(what)

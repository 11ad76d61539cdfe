"""A search under several category prefixes (the session start's preferences and
anti-patterns) is one ranked search: entries under any of them, filtered before the top-k in
the keyword and the vector search alike, ranked together (issue 54)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from tests.support.embedders import HashEmbedder

WANTED = ("user-preferences", "anti-patterns")


def _crowded(store: LongTermStore) -> tuple[str, str]:
    """150 notes outrank the preference and the anti-pattern for 'deploy'; a look-alike
    category ('user-preferences-old') and a parent ('anti') are not under either."""
    for i in range(150):
        store.save(f"deploy deploy deploy with kubectl apply {i}", "notes")
    store.save("deploy on fridays was fine once", "user-preferences-old")
    store.save("deploy deploy from the laptop", "anti")
    pref = store.save("the user wants deploy notes kept short", "user-preferences/style")
    anti = store.save("never deploy without running the tests", "anti-patterns")
    return pref.entry.id, anti.entry.id


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_keyword_search_under_two_categories_finds_both_under_a_crowd(
    tmp_path: Path, checkpointed: bool
) -> None:
    store = LongTermStore(tmp_path)
    pref, anti = _crowded(store)
    if checkpointed:
        assert store.checkpoint()
    found = [h.entry.id for h in store.search("deploy", WANTED)]
    assert set(found) == {pref, anti}
    assert [h.entry.id for h in store.search("deploy", "anti-patterns")] == [anti]
    assert not {pref, anti} & {h.entry.id for h in store.search("deploy", limit=20)}


def test_a_vector_search_under_two_categories_filters_before_the_top_k(tmp_path: Path) -> None:
    store = LongTermStore(  # every hit, relevant or not: the filter alone is what is checked
        tmp_path, embedder=HashEmbedder(), embed_on_save=True, keyword_weight=0.0, relevance=None
    )
    store.load_vectors()
    pref, anti = _crowded(store)
    assert {h.entry.id for h in store.search("deploy kubectl", WANTED)} == {pref, anti}
    assert {h.entry.id for h in store.search(None, WANTED)} == {pref, anti}

"""Changes not yet checkpointed override the index's version of an entry in a keyword
search, however many of the index's best hits they override."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dreamwell.stores import LongTermStore


def test_a_search_still_finds_the_unchanged_entries_when_most_of_its_best_hits_are_pending(
    tmp_path: Path,
) -> None:
    store = LongTermStore(tmp_path)
    strong = [store.save(f"apple apple note {i}").entry for i in range(95)]
    weak = [store.save(f"apple note {i}").entry for i in range(55)]
    assert store.checkpoint()
    # the 95 best hits for "apple" change (pending: not yet in the index)
    store.apply([replace(e, content=f"banana note {i}") for i, e in enumerate(strong)])
    assert store.pending() == 95
    found = store.search("apple", limit=20)
    assert len(found) == 20
    assert {h.entry.id for h in found} <= {e.id for e in weak}
    assert all("apple" in h.entry.content for h in found)
    # and after the checkpoint the same answer comes from the index alone
    assert store.checkpoint()
    assert [h.entry.id for h in store.search("apple", limit=20)] == [h.entry.id for h in found]

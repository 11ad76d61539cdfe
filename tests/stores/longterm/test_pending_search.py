"""Changes not yet checkpointed override the index's version of an entry in a keyword
search, however many of the index's best hits they override."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.index import view
from dreamwell.stores.index.postings import DocTerms
from dreamwell.stores.index.text_index import IndexDoc


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


def test_another_process_s_saves_are_analysed_once_even_after_the_view_packs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search analyses the terms of the pending entries it has not seen and keeps them. It
    kept them only while an entry was the very object the view held: once the view folded
    its changes into packed records (every 1,024 changes), each read rebuilds a new object,
    and every search beside a writer analysed its hundreds of pending saves again."""
    monkeypatch.setattr(view, "_FOLD_AT", 8)
    writer, reader = LongTermStore(tmp_path), LongTermStore(tmp_path)
    for i in range(20):
        writer.save(f"quarry ledger line {i}")
    analysed: list[str] = []
    doc_terms = reader._parts.index.doc_terms

    def counting(doc: IndexDoc) -> DocTerms:
        analysed.append(doc.id)
        return doc_terms(doc)

    monkeypatch.setattr(reader._parts.index, "doc_terms", counting)
    assert len(reader.search("quarry ledger")) == 20
    assert reader.pending() == 20 and len(analysed) == 20
    assert len(reader.search("ledger line 7")) >= 1
    assert len(analysed) == 20  # nothing analysed again


def test_saves_read_after_the_checkpoint_that_folded_them_are_not_pending(
    tmp_path: Path,
) -> None:
    """A process that reads another's saves only after that one folded them into the index
    (it was idle meanwhile) finds them in the index: they are not pending, so its searches
    do not score them a second time, outside the index, until the next checkpoint. Read in
    one catch-up with a save made after the checkpoint, only that one is pending."""
    writer, reader = LongTermStore(tmp_path), LongTermStore(tmp_path)
    for i in range(5):
        writer.save(f"harbour ledger line {i}")
    assert writer.checkpoint()
    writer.save("harbour ledger line 5")
    assert len(reader.search("harbour ledger")) == 6
    assert reader.pending() == 1
    assert writer.checkpoint()
    assert len(reader.search("harbour ledger")) == 6
    assert reader.pending() == 0

"""The pending entries' postings: a search scores only the documents holding a query term,
with the same BM25 the full scan gave, and never keeps terms of text that changed meanwhile."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.index.postings import DocTerms, Postings
from dreamwell.stores.index.text_index import _AVG_LEN, _B, _K1, CONTEXT_BOOST, TextIndex

WORDS = ["kayak", "harbour", "tide", "anchor", "sail", "rope", "lantern", "gull", "pier", "buoy"]


def scan(index: TextIndex, query: str, docs: dict[str, DocTerms]) -> dict[str, float]:
    """The scoring before postings: every document, every query term (the reference)."""
    searcher = index._index.searcher()
    total = searcher.num_docs + len(docs)
    out: Counter[str] = Counter()
    for name, boost in (("body", 1.0), ("ctx", CONTEXT_BOOST)):
        fields = {
            i: (d.counts, d.length) if name == "body" else (d.context, d.context_length)
            for i, d in docs.items()
        }
        lengths = [n for _, n in fields.values() if n]
        avg = sum(lengths) / len(lengths) if len(lengths) >= 8 else _AVG_LEN
        for term in index.terms(query):
            df = searcher.doc_freq(name, term) + sum(1 for c, _ in fields.values() if term in c)
            idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
            for i, (counts, length) in fields.items():
                if counts.get(term):
                    norm = _K1 * (1 - _B + _B * length / avg)
                    out[i] += boost * idf * counts[term] * (_K1 + 1) / (counts[term] + norm)
    return {i: s for i, s in out.items() if s > 0}


def doc(rng: random.Random) -> DocTerms:
    body = Counter(rng.choices(WORDS, k=rng.randint(0, 12)))
    ctx = Counter(rng.choices(WORDS, k=rng.randint(0, 6)))
    return DocTerms(body, sum(body.values()), ctx, sum(ctx.values()))


def test_postings_score_as_the_full_scan_did_through_puts_and_drops(tmp_path: Path) -> None:
    index = TextIndex(tmp_path / "index")
    rng = random.Random(7)
    docs: dict[str, DocTerms] = {}
    postings = Postings()
    for step in range(400):
        doc_id = f"d{rng.randint(0, 60)}"
        if rng.random() < 0.3:
            docs.pop(doc_id, None)
            postings.drop(doc_id)
        else:
            docs[doc_id] = doc(rng)
            postings.put(doc_id, docs[doc_id])
        if step % 20 == 0:
            query = " ".join(rng.sample(WORDS, 3))
            got = dict(index.score_docs(query, postings))
            want = scan(index, query, docs)
            assert got.keys() == want.keys()
            assert all(got[i] == pytest.approx(want[i], rel=1e-9) for i in want)
            assert dict(index.score_docs(query, docs)) == pytest.approx(got)  # a plain mapping
    postings.keep_only({i: None for i in list(docs)[:5]})
    assert len(postings) == 5 and all(postings.get(i) == docs[i] for i in list(docs)[:5])


def test_a_search_looks_only_at_the_pending_entries_holding_a_query_term(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for i in range(300):
        store.save(f"note {i} about the weather and the garden")
    kayak = store.save("the kayak is stored at the harbour").entry
    looked: list[str] = []
    index = store._parts.index
    score_docs = index.score_docs

    def counting(
        query: str, docs: Postings, keep: object = None, weights: object = None
    ) -> list[tuple[str, float]]:
        def noting(doc_id: str) -> bool:
            looked.append(doc_id)
            return keep(doc_id)  # type: ignore[operator,no-any-return]

        return score_docs(query, docs, noting, weights)  # type: ignore[arg-type]

    index.score_docs = counting  # type: ignore[method-assign]
    assert store.pending() == 301
    assert [h.entry.id for h in store.search("kayak")] == [kayak.id]
    assert looked == [kayak.id]


def changed_while_analysed(tmp_path: Path, **change: object) -> tuple[LongTermStore, str]:
    """A store holding one pending entry whose first analysis by a search is met by `change`
    landing (as another process's change would, through the store)."""
    store = LongTermStore(tmp_path)
    entry = store.save("the lantern hangs on the pier").entry
    index = store._parts.index
    doc_terms = index.doc_terms
    landed = []

    def changing_meanwhile(doc: object) -> DocTerms:
        terms = doc_terms(doc)  # type: ignore[arg-type]
        if not landed:
            landed.append(True)
            store.apply([replace(entry, **change)])  # type: ignore[arg-type]
        return terms

    index.doc_terms = changing_meanwhile  # type: ignore[method-assign]
    return store, entry.id


def test_terms_of_text_that_changed_while_it_was_analysed_are_not_kept(tmp_path: Path) -> None:
    """The search analyses a pending entry from its view; an edit landing meanwhile must not
    leave the old text's terms behind (the next search would find the entry by old words)."""
    store, entry_id = changed_while_analysed(tmp_path, content="the buoy floats by the anchor")
    store.search("lantern")
    assert store.search("lantern") == []
    assert [h.entry.id for h in store.search("buoy")] == [entry_id]


def test_a_pending_entry_that_changes_while_a_search_analyses_it_is_still_found(
    tmp_path: Path,
) -> None:
    """Seen in the multi-process suite: another process's change of a pending entry (here
    its importance) landed while a search analysed it; the search neither kept those terms
    nor scored the entry, and the index's copy is left out for a pending entry, so a search
    for the entry's own unique word found nothing."""
    store, entry_id = changed_while_analysed(tmp_path, importance=0.9)
    assert [h.entry.id for h in store.search("lantern")] == [entry_id]
    assert [h.entry.id for h in store.search("lantern")] == [entry_id]


def test_a_neighbour_deleted_while_a_search_analyses_an_entry_leaves_no_words_behind(
    tmp_path: Path,
) -> None:
    """Seen in a CI run of the multi-process suite: a search analysed a pending entry, whose
    context field holds its neighbour's text, while another process's deletion of that
    neighbour landed; the terms were kept, and every later search for the deleted memory's
    own word found the neighbour through them."""
    store = LongTermStore(tmp_path)
    gone = store.save("the lantern hangs on the pier", caller="session/a").entry
    kept = store.save("the buoy floats by the anchor", caller="session/a").entry
    # linked: the neighbour's words are in the kept memory's context field
    assert [h.entry.id for h in store.search("lantern")] == [gone.id, kept.id]
    store.checkpoint()
    store.apply([replace(kept, importance=0.9)])  # kept is pending again, its terms not cached
    index = store._parts.index
    doc_terms = index.doc_terms
    deleted = []

    def deleting_meanwhile(doc: object) -> DocTerms:
        terms = doc_terms(doc)  # type: ignore[arg-type]
        if not deleted and getattr(doc, "id", None) == kept.id:
            deleted.append(True)
            store.delete(gone.id)
        return terms

    index.doc_terms = deleting_meanwhile  # type: ignore[method-assign]
    store.search("anchor")
    assert deleted
    assert store.search("lantern") == []
    assert [h.entry.id for h in store.search("anchor")] == [kept.id]

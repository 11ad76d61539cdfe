"""Contextual memories: a memory saved by a caller minutes after its previous one, in the same
category, is linked to it and found through its neighbours' words (a second Tantivy field) and
meaning (its vector summed with theirs); the gate keeps unrelated saves apart."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore
from dreamwell.stores.index.rows import Rows
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow
from tests.support.calls import ok

A = "We moved to Lisbon in March"
B = "The rent there is 1200 euros a month"


def _ids(store: LongTermStore, query: str) -> list[str]:
    return [h.entry.content for h in store.search(query)]


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_memory_is_found_through_the_words_of_the_one_before(
    tmp_path: Path, checkpointed: bool
) -> None:
    store = LongTermStore(tmp_path / "on")
    off = LongTermStore(tmp_path / "off", contextual=False)
    saved = {}
    for s in (store, off):
        first = s.save(A, "home", caller="session/a").entry
        second = s.save(B, "home", caller="session/a").entry
        saved[id(s)] = (first, second)
        if checkpointed:
            assert s.checkpoint()
    first, second = saved[id(store)]
    assert dict(second.metadata)[FOLLOWS] == first.id
    assert all(FOLLOWS not in e.metadata for e in off.entries())
    # "Lisbon" is only in A; with context B is found too (ranked below A), without it is not
    assert _ids(store, "Lisbon") == [A, B]
    assert _ids(off, "Lisbon") == [A]
    # and A through B's words ("rent"), ranked below B
    assert _ids(store, "rent") == [B, A]


def test_deleting_the_previous_memory_removes_its_words_from_the_next(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    first = store.save(A, "home", caller="session/a").entry
    store.save(B, "home", caller="session/a")
    assert store.checkpoint()
    store.delete(first.id)
    assert _ids(store, "Lisbon") == []  # before the checkpoint (the overlay)
    assert store.checkpoint()
    assert _ids(store, "Lisbon") == []  # and in the index: B's document was refreshed
    assert _ids(LongTermStore(tmp_path), "Lisbon") == []


@pytest.mark.parametrize("checkpointed", [False, True])
def test_words_reach_one_memory_along_and_no_further(tmp_path: Path, checkpointed: bool) -> None:
    """The contextual keyword field holds the memories saved just before and just after
    (the contextual vector reaches two each way: see the cosine test below)."""
    store = LongTermStore(tmp_path)
    chain = [A, B, "The flat has a balcony", "We bought a cargo bike"]
    entries = [store.save(text, "home", caller="session/a").entry for text in chain]
    if checkpointed:
        assert store.checkpoint()
    assert _ids(store, "Lisbon") == [A, B]
    assert _ids(store, "cargo") == [chain[3], chain[2]]
    assert _ids(store, "balcony")[0] == chain[2]
    assert set(_ids(store, "balcony")[1:]) == {B, chain[3]}
    store.delete(entries[2].id)  # the middle one goes: its words leave both neighbours
    assert _ids(store, "balcony") == []
    if checkpointed:
        assert store.checkpoint()
        assert _ids(LongTermStore(tmp_path), "balcony") == []


@pytest.mark.parametrize("gate", ["other caller", "other category", "too late", "no caller"])
def test_the_gate_keeps_unrelated_saves_apart(tmp_path: Path, gate: str) -> None:
    store = LongTermStore(tmp_path)
    now = utcnow()
    store.save(A, "home", caller="session/a", now=now)
    caller = {"other caller": "session/b", "no caller": None}.get(gate, "session/a")
    category = "work" if gate == "other category" else "home"
    later = now + timedelta(seconds=301 if gate == "too late" else 299)
    second = store.save(B, category, caller=caller, now=later).entry
    assert FOLLOWS not in second.metadata
    assert _ids(store, "Lisbon") == [A]


def test_within_the_window_the_link_is_made(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    now = utcnow()
    first = store.save(A, "home", caller="session/a", now=now).entry
    second = store.save(B, "home", caller="session/a", now=now + timedelta(seconds=299)).entry
    assert dict(second.metadata)[FOLLOWS] == first.id


@pytest.mark.parametrize("apart", ["categories", "callers"])
def test_unrelated_consecutive_saves_rank_exactly_as_without_context(
    tmp_path: Path, apart: str
) -> None:
    """Unrelated facts saved one after another, each in its own category (or by callers
    taking turns): the gate links none of them, so every search ranks as with context off."""
    topics = ["tea", "bikes", "taxes", "piano", "garden", "boats", "cheese", "chess"]
    stores = [LongTermStore(tmp_path / "on"), LongTermStore(tmp_path / "off", contextual=False)]
    for s in stores:
        for i, topic in enumerate(topics):
            if apart == "categories":
                s.save(f"a note about {topic} and more {i}", f"notes/{topic}", caller="session/a")
            else:
                s.save(f"a note about {topic} and more {i}", "notes", caller=f"session/{i}")
    assert all(FOLLOWS not in e.metadata for e in stores[0].entries())
    for query in [*topics, "note", "more about tea"]:
        on, off = ({(h.entry.content, round(h.score, 6)) for h in s.search(query)} for s in stores)
        assert on == off and on


def test_contextual_cosine_is_the_normalised_sum_of_neighbours_two_links_each_way() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = Rows(16)
    now = utcnow()
    ids = ["a", "b", "c", "d", "e", "f"]  # a <- b <- c <- d <- e ; f alone
    for n, entry_id in enumerate(ids):
        follows = {"b": "a", "c": "b", "d": "c", "e": "d"}.get(entry_id)
        meta = {FOLLOWS: follows} if follows else {}
        rows.put(MemoryEntry(entry_id, "x", None, (), now, now, now, metadata=meta))
        rows.set_vector(entry_id, "m", vectors[n])
    query = rng.normal(size=8).astype(np.float32)

    def expected(members: str) -> dict[str, float]:
        out = {}
        for entry_id, around in zip(ids, members.split(), strict=True):
            if around == "-":  # deleted: not a result
                continue
            v = sum(vectors[ids.index(m)] for m in around)
            norm = np.linalg.norm(v) if len(around) > 1 else 1.0  # alone: the plain cosine
            out[entry_id] = float(v @ query / norm)
        return out

    plain, context = rows.vector_top(list(query), 6, rows.mask(None, ()), contextual=True)
    assert dict(context) == pytest.approx(expected("abc abcd abcde bcde cde f"), abs=1e-5)
    assert dict(plain)["f"] == dict(context)["f"]
    rows.remove("b")  # a deleted memory no longer counts, and a still reaches c
    _, context = rows.vector_top(list(query), 5, rows.mask(None, ()), contextual=True)
    assert dict(context) == pytest.approx(expected("ac - acde cde cde f"), abs=1e-5)


@pytest.mark.anyio
@pytest.mark.parametrize("contextual", [True, False])
async def test_saves_over_mcp_are_linked_per_caller(tmp_path: Path, contextual: bool) -> None:
    settings = Settings(data_dir=tmp_path, embedder="none", contextual=contextual)
    async with Client(build_server(settings)) as client:
        await ok(client, "save_memory", content=A, category="home")
        await ok(client, "save_memory", content=B, category="home")
        found = await ok(client, "search_memory", query="Lisbon")
    assert ("1200 euros" in found) is contextual
    entries = sorted(LongTermStore(tmp_path).entries(), key=lambda e: e.created_at)
    assert (FOLLOWS in entries[1].metadata) is contextual


def test_a_search_analyses_a_memory_again_only_once_its_own_or_its_neighbours_text_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 57: each search analysed every indexed hit's text and its neighbours' again to
    weigh its share of the query's words (3-6 ms of a hybrid search at 1,000 memories). The
    terms are kept until that text changes: here deleting B changes A's contextual field."""
    from dreamwell.stores.index.text_index import TextIndex

    store = LongTermStore(tmp_path)
    a = store.save(A, "life", caller="me").entry
    b = store.save(B, "life", caller="me").entry
    store.checkpoint()  # indexed: no longer the pending entries' own terms
    analysed: list[str] = []
    doc_terms = TextIndex.doc_terms
    monkeypatch.setattr(
        TextIndex, "doc_terms", lambda index, doc: analysed.append(doc.id) or doc_terms(index, doc)
    )
    assert sorted(_ids(store, "Lisbon rent")) == sorted([A, B])
    assert sorted(analysed) == sorted([a.id, b.id])
    analysed.clear()
    assert sorted(_ids(store, "rent in Lisbon")) == sorted([A, B])
    assert analysed == []  # the same texts: the terms kept
    store.delete(b.id)
    store.checkpoint()
    assert _ids(store, "moved to Lisbon in March") == [A]
    assert analysed == [a.id]  # A lost B's words from its context: analysed again

"""A hybrid search runs its keyword side (Tantivy's search, the hits read back, their
weights) on a query thread while its own thread embeds the query and then ranks vectors:
they overlap (e5 and Tantivy each use a core and release the GIL), so a search costs about
the longest of them, not their sum, and its own thread never waits for another to start the
embedding (issue 24, criteria 3 and 5)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dreamwell.stores import LongTermStore, MemoryEntry
from dreamwell.stores.index.rows import Rows
from dreamwell.stores.index.text_index import TextIndex
from tests.support.embedders import SeededEmbedder

# searched by its own text: with seeded vectors a memory's meaning answers only a query that
# is its text (the relevance rule drops words whose meaning stands far behind unrelated text)
TEXT = "the lighthouse keeper logs the tides at dawn"


class Meeting(SeededEmbedder):
    """Embeds a query only once the BM25 search has started, and tells it it has begun:
    each side waits for the other, so the search answers only if they overlap."""

    def __init__(self) -> None:
        self.embedding = threading.Event()
        self.keyword = threading.Event()
        self.threads: set[str] = set()

    def embed_query(self, text: str) -> list[float]:
        self.threads.add(threading.current_thread().name)
        self.embedding.set()
        assert self.keyword.wait(10), "BM25 did not start while the query was embedded"
        return super().embed_query(text)


def _meeting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, late: str
) -> tuple[Meeting, LongTermStore, MemoryEntry, list[str]]:
    """A store with one embedded memory whose embedder and `TextIndex.<method>` each wait
    for the other to start (`late`: the message when the method ran after the embedding);
    with the names of the threads the method ran on."""
    embedder = Meeting()
    store = LongTermStore(tmp_path, embedder=embedder)
    saved = store.save(TEXT).entry
    assert store.backfill() == 1
    original = getattr(TextIndex, method)
    ran_on: list[str] = []

    def meeting(self: TextIndex, *args: Any, **kwargs: Any) -> Any:
        ran_on.append(threading.current_thread().name)
        embedder.keyword.set()
        assert embedder.embedding.wait(10), late
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TextIndex, method, meeting)
    return embedder, store, saved, ran_on


def test_the_query_is_embedded_while_bm25_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    late = "the query was not being embedded during BM25"
    embedder, store, saved, searched_on = _meeting(tmp_path, monkeypatch, "lookup", late)
    hits = store.search(TEXT)
    assert hits and hits[0].entry.id == saved.id and hits[0].score > 0
    assert embedder.threads == {threading.current_thread().name} != set(searched_on)
    # keyword-only searches embed nothing
    embedder.keyword.clear()
    embedder.embedding.clear()
    keyword_only = LongTermStore(tmp_path, embedder=embedder, keyword_weight=1.0)
    monkeypatch.undo()
    assert keyword_only.search("lighthouse")[0].entry.id == saved.id
    assert not embedder.embedding.is_set()


def test_vectors_are_ranked_while_tantivy_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tantivy's search waits for the vector ranking to start and the ranking for Tantivy's
    search to start: the search answers only if they run at once, on different threads."""
    store = LongTermStore(tmp_path, embedder=SeededEmbedder())
    saved = store.save(TEXT).entry
    assert store.backfill() == 1
    ranking, searching = threading.Event(), threading.Event()
    threads: dict[str, str] = {}
    lookup, vector_top = TextIndex.lookup, Rows.vector_top

    def keyword(self: TextIndex, *args: Any, **kwargs: Any) -> Any:
        threads["tantivy"] = threading.current_thread().name
        searching.set()
        assert ranking.wait(10), "the vectors were not ranked while Tantivy searched"
        return lookup(self, *args, **kwargs)

    def vectors(self: Rows, *args: Any, **kwargs: Any) -> Any:
        threads["vectors"] = threading.current_thread().name
        ranking.set()
        assert searching.wait(10), "Tantivy did not search while the vectors were ranked"
        return vector_top(self, *args, **kwargs)

    monkeypatch.setattr(TextIndex, "lookup", keyword)
    monkeypatch.setattr(Rows, "vector_top", vectors)
    hits = store.search(TEXT)
    assert hits and hits[0].entry.id == saved.id and hits[0].score > 0
    assert threads["tantivy"] != threads["vectors"] == threading.current_thread().name


def test_keyword_hits_are_resolved_and_weighed_while_the_query_is_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword side's work after Tantivy's search (its hits read back as ids, the
    pending entries merged, their weights read) is done on the query thread too, while the
    search's own thread embeds: the embedding waits for the hits to be read back, and the
    read-back for the embedding to start."""
    late = "the hits were read back after the embedding"
    _, store, saved, resolved_on = _meeting(tmp_path, monkeypatch, "ids_of", late)
    hits = store.search(TEXT)
    assert hits and hits[0].entry.id == saved.id and hits[0].score > 0
    assert resolved_on and threading.current_thread().name not in resolved_on

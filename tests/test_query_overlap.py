"""A hybrid search embeds its query on another thread while BM25 runs on its own: the two
overlap (e5 uses one core and releases the GIL), so a search costs the longer of the two,
not their sum (issue 24, criterion 3)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.text_index import TextIndex
from tests.test_vector_index import SeededEmbedder


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


def test_the_query_is_embedded_while_bm25_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = Meeting()
    store = LongTermStore(tmp_path, embedder=embedder)
    saved = store.save("the lighthouse keeper logs the tides at dawn").entry
    assert store.backfill() == 1
    search = TextIndex.search

    def keyword(self: TextIndex, *args: Any, **kwargs: Any) -> Any:
        embedder.keyword.set()
        assert embedder.embedding.wait(10), "the query was not being embedded during BM25"
        return search(self, *args, **kwargs)

    monkeypatch.setattr(TextIndex, "search", keyword)
    hits = store.search("lighthouse tides")
    assert hits and hits[0].entry.id == saved.id and hits[0].score > 0
    assert threading.current_thread().name not in embedder.threads
    # keyword-only searches embed nothing
    embedder.keyword.clear()
    embedder.embedding.clear()
    keyword_only = LongTermStore(tmp_path, embedder=embedder, keyword_weight=1.0)
    monkeypatch.setattr(TextIndex, "search", search)
    assert keyword_only.search("lighthouse")[0].entry.id == saved.id
    assert not embedder.embedding.is_set()

"""The analysed terms of documents the text index does not hold yet, with their postings.

A search scores the entries changed since the last checkpoint itself (`TextIndex.score_docs`).
It used to score every one of them for every query: with 500 pending, 1.1 ms of each search,
and more under a foreign writer, whose saves are all pending until the next checkpoint (issue
24). With postings (term -> document -> count, per field) it scores only the documents that
hold a query term. Thread-safe: a search adds the terms it analysed while the store's
catch-up drops the changed ones.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass

FIELDS = ("body", "ctx")


@dataclass(frozen=True)
class DocTerms:
    """A document's analysed terms, for scoring it outside the index (see score_docs)."""

    counts: Mapping[str, int]
    length: int
    context: Mapping[str, int] = dataclasses.field(default_factory=dict)
    context_length: int = 0


class Postings:
    def __init__(self, docs: Mapping[str, DocTerms] | None = None) -> None:
        self._lock = threading.Lock()
        self._docs: dict[str, DocTerms] = {}
        self._post: dict[str, dict[str, dict[str, int]]] = {f: {} for f in FIELDS}
        self._length = dict.fromkeys(FIELDS, 0)  # the documents' summed lengths
        self._counted = dict.fromkeys(FIELDS, 0)  # documents with a non-empty field
        # a document's drops since the last keep_only, and keep_only's count: terms analysed
        # before a drop (a neighbour's deletion changes a document's context field) are stale
        self._epoch: dict[str, int] = {}
        self._era = 0
        for doc_id, terms in (docs or {}).items():
            self.put(doc_id, terms)

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def get(self, doc_id: str) -> DocTerms | None:
        return self._docs.get(doc_id)

    def ticket(self, doc_id: str) -> tuple[int, int]:
        """Take before analysing a document; `put` refuses the terms if it was dropped since."""
        with self._lock:
            return self._era, self._epoch.get(doc_id, 0)

    def put(self, doc_id: str, terms: DocTerms, ticket: tuple[int, int] | None = None) -> bool:
        """Keep `terms` for `doc_id`; False (nothing kept) if the document was dropped since
        `ticket` was taken."""
        with self._lock:
            if ticket is not None and ticket != (self._era, self._epoch.get(doc_id, 0)):
                return False
            self._drop(doc_id)
            self._docs[doc_id] = terms
            for field, (counts, length) in _fields(terms).items():
                post = self._post[field]
                for term, count in counts.items():
                    post.setdefault(term, {})[doc_id] = count
                self._length[field] += length
                self._counted[field] += length > 0
            return True

    def drop(self, doc_id: str) -> None:
        with self._lock:
            self._drop(doc_id)
            self._epoch[doc_id] = self._epoch.get(doc_id, 0) + 1

    def keep_only(self, ids: Mapping[str, object]) -> None:
        """Drop every document not in `ids` (those the index holds now). Every ticket taken
        before is void."""
        with self._lock:
            for doc_id in [i for i in self._docs if i not in ids]:
                self._drop(doc_id)
            self._era += 1
            self._epoch.clear()

    def _drop(self, doc_id: str) -> None:
        terms = self._docs.pop(doc_id, None)
        if terms is None:
            return
        for field, (counts, length) in _fields(terms).items():
            post = self._post[field]
            for term in counts:
                holders = post.get(term)
                if holders is not None:
                    holders.pop(doc_id, None)
                    if not holders:
                        del post[term]
            self._length[field] -= length
            self._counted[field] -= length > 0

    def holding(self, field: str, term: str) -> dict[str, tuple[int, int]]:
        """The documents whose `field` holds `term`: id -> (count, the field's length)."""
        with self._lock:
            holders = self._post[field].get(term, {})
            return {i: (c, _fields(self._docs[i])[field][1]) for i, c in holders.items()}

    def average_length(self, field: str, at_least: int) -> float | None:
        """The mean length of the non-empty `field`s, when at least `at_least` documents have
        one (fewer say little about the index's average)."""
        with self._lock:
            n = self._counted[field]
            return self._length[field] / n if n >= at_least and n else None


def _fields(terms: DocTerms) -> dict[str, tuple[Mapping[str, int], int]]:
    return {"body": (terms.counts, terms.length), "ctx": (terms.context, terms.context_length)}

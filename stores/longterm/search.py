"""Search: keyword and vector candidates, the hybrid ranking, and the cross-encoder's rerank.

Keyword candidates are BM25 over the Tantivy index plus the entries changed since the last
checkpoint (scored with the index's own statistics, overriding the index's copy); vector
candidates are the top cosines of the query over this process's rows, and of their
contextual neighbours. `rank_hits` blends them, a "when" question favours the candidates that
say when (`temporal`); a reranker, if given, re-orders the head.
With no query, the most recently seen entries. Everything is read from the mirror: a search
takes no lock and writes nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index.embedders import Embedder, EmbedderError, Reranker
from dreamwell.stores.index.hybrid_rank import CONTEXT_WEIGHT, rank_hits
from dreamwell.stores.index.postings import DocTerms
from dreamwell.stores.index.relevance import (
    REFERENCES,
    SAMPLE,
    Baseline,
    Rule,
    Words,
    keyword_share,
    select,
    topical,
)
from dreamwell.stores.index.rows import Rows, cosines
from dreamwell.stores.index.temporal import favour_times
from dreamwell.stores.index.text_index import IndexDoc
from dreamwell.stores.index.view import View
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.mirror import Pending
from dreamwell.stores.longterm.vectors import Vectors
from dreamwell.stores.model import (
    PROJECT,
    MemoryEntry,
    check_categories,
    check_query,
    check_tags,
    under_any,
)

logger = logging.getLogger(__name__)

CANDIDATES = 100
# The analysed terms of this many indexed entries are kept between searches: each search
# analysed every hit's text and its neighbours' again to weigh its share of the query's words
# (30 hits: 3-6 ms of a hybrid search at 1,000 memories, most of its distance from its floor).
DOC_TERMS_KEPT = 1024  # ~6 KB each (a LoCoMo turn with its neighbours): 6.5 MB at most
Scored = list[tuple[str, float]]


@dataclass(frozen=True)
class Hit:
    entry: MemoryEntry
    score: float


@dataclass(frozen=True)
class Tuning:
    """How a search ranks (see `LongTermStore`)."""

    min_similarity: float
    keyword_weight: float
    contextual: bool
    reranker: Reranker | None
    rerank_depth: int
    relevance: Rule | None  # which hits are relevant enough (None: every hit)


@dataclass(frozen=True)
class Filter:
    """What a search is limited to, before its top-k: category prefixes (any one of them; ()
    is every category), tags that must all be there, and a project (its memories and global
    ones; None: every project's)."""

    category: tuple[str, ...] = ()
    tags: Sequence[str] = ()
    project: str | None = None

    def mask(self, rows: Rows) -> npt.NDArray[np.bool_]:
        return rows.mask(self.category, self.tags, self.project)


def matches(e: MemoryEntry, f: Filter) -> bool:
    """Live, under the category prefix (segment boundary), carrying every tag, and of the
    project or global."""
    if not e.live or not all(t in e.tags for t in f.tags):
        return False
    if f.project is not None and (e.metadata.get(PROJECT) or f.project) != f.project:
        return False
    return under_any(e.category, f.category)


def _weighing(view: View, f: Filter) -> Callable[[str], float | None]:
    """The importance of an entry that is live and passes the filter (else None), read from
    the view's packed records without rebuilding the entry."""
    if not f.category and not f.tags and f.project is None:
        return view.importance
    cats: list[bytes | None] = [c.encode("utf-8", "surrogatepass") for c in f.category]
    wanted = [t.encode("utf-8", "surrogatepass") for t in f.tags]

    def weigh(entry_id: str) -> float | None:
        for cat in cats or [None]:  # under any one of them
            if (w := view.filtered_importance(entry_id, cat, wanted, f.project)) is not None:
                return w
        return None

    return weigh


def _weights(view: View, candidates: Scored, f: Filter) -> dict[str, float]:
    """The importance of each candidate that is live and passes the filter: only the hits
    are rebuilt as entries."""
    weigh = _weighing(view, f)
    return {i: w for i, _ in candidates if (w := weigh(i)) is not None}


def _content(view: View, entry_id: str) -> str | None:
    entry = view.get(entry_id)
    return None if entry is None else entry.content


@functools.cache
def _query_pool() -> ThreadPoolExecutor:
    """The threads that run the keyword side of searches (Tantivy's search, the pending
    entries, the weights) while their searches' own threads embed the query and rank
    vectors (two: two searches at once each have one)."""
    return ThreadPoolExecutor(max_workers=2, thread_name_prefix="dreamwell-query")


class Searcher:
    def __init__(
        self, parts: Parts, vectors: Vectors, embedder: Embedder | None, tuning: Tuning
    ) -> None:
        self.parts = parts
        self.vectors = vectors
        self.embedder = embedder
        self.tuning = tuning
        self._references: npt.NDArray[np.float32] | None = None
        self._references_lock = threading.Lock()
        self._doc_terms: dict[str, tuple[IndexDoc, DocTerms]] = {}  # see DOC_TERMS_KEPT

    def search(
        self,
        query: str | None = None,
        category: str | Iterable[str] | None = None,
        tags: str | Iterable[str] | None = None,
        limit: int = 20,
        project: str | None = None,
    ) -> list[Hit]:
        f = Filter(check_categories(category), check_tags(tags), project)
        text = check_query(query)
        self.parts.follower.fresh()
        m = self.parts.mirror
        view, rows = m.view, m.rows
        if not text:
            found = (view.get(i) for i in rows.recent(limit * 2, f.mask(rows)))
            hits = [Hit(e, 0.0) for e in found if e is not None and matches(e, f)]
            return hits[:limit]
        t = self.tuning
        bm25, ok, words, cosine, context, (vector, floor) = self._candidates(
            text, view, rows, f, limit
        )
        ok.update(_weights(view, [h for h in [*cosine, *context] if h[0] not in ok], f))
        ranked = rank_hits(
            [h for h in bm25 if h[0] in ok],
            [h for h in cosine if h[0] in ok],
            ok,
            t.min_similarity,
            t.keyword_weight,
            contextual=[h for h in context if h[0] in ok],
            context_weight=CONTEXT_WEIGHT,
            # only a keyword candidate's part can be missing (rank_hits asks of those alone)
            without_vector={i for i, _ in bm25 if i in ok and not rows.has_vector(i)}
            if cosine
            else (),
        )
        ranked = favour_times(text, ranked, lambda i: _content(view, i))
        if t.reranker is not None:
            ranked = self._rerank(t.reranker, text, ranked, view)
        if t.relevance is not None and words is not None:
            near = dict(cosine)
            if vector is not None:  # the keyword hits' cosines too, of those judged
                unknown = [i for i, _ in ranked[: 2 * limit] if i not in near]
                near.update(cosines(rows, vector, unknown))
            ranked = select(
                t.relevance, ranked, lambda i: (floor.meaning(near.get(i), i), words.of(i)), limit
            )
        return [Hit(e, s) for i, s in ranked[:limit] if (e := view.get(i)) is not None]

    def _terms_of(self, doc: IndexDoc) -> DocTerms:
        """`doc`'s analysed terms, kept while its text, and its neighbours', stay the same."""
        kept = self._doc_terms.get(doc.id)
        if kept is not None and kept[0] == doc:
            return kept[1]
        terms = self.parts.index.doc_terms(doc)
        if len(self._doc_terms) >= DOC_TERMS_KEPT:
            self._doc_terms.clear()  # searches refill it with what they find
        self._doc_terms[doc.id] = (doc, terms)
        return terms

    def _candidates(
        self, text: str, view: View, rows: Rows, f: Filter, limit: int
    ) -> tuple[
        Scored,
        dict[str, float],
        _QueryWords | None,
        Scored,
        Scored,
        tuple[list[float] | None, Baseline],
    ]:
        """The keyword candidates with the weights of those that pass the filter, the
        query's words, and the vector and contextual candidates of a query. With a vector
        search, the keyword side (Tantivy's search, the pending entries, the weights, and the
        words the best keyword candidates hold) runs on a query thread while this one embeds
        the query and ranks vectors (e5 uses one core and releases the GIL, as Tantivy does),
        so a search costs about the longest of them, not their sum. The embedding is this
        thread's own: it never waits for another thread to start it."""
        pending = self.parts.mirror.pending  # before the index: a checkpoint moves it there

        def keywords(judged: int) -> tuple[Scored, dict[str, float], _QueryWords | None]:
            found, ok = self._keywords(text, view, pending, f)
            if self.tuning.relevance is None:
                return found, ok, None
            words = _QueryWords(self, text, view)
            for entry_id, _ in found[:judged]:
                words.of(entry_id)
            return found, ok, words

        if not self._vectors_wanted(view):  # nothing to do meanwhile: words as they are asked
            return *keywords(0), [], [], (None, Baseline())
        # the relevance rule asks of the best 2 x limit hits, most of them keyword candidates
        # (the words of 20 hits took 2.4 ms of a search at 10,000 memories, after the query
        # was embedded: most of its distance from its floor, issue 57)
        found = _query_pool().submit(keywords, 2 * limit)
        vector = self._query_vector(text)
        cosine, context = self._cosine(vector, rows, f)
        return *found.result(), cosine, context, (vector, self._floor(vector, rows))

    def _floor(self, vector: list[float] | None, rows: Rows) -> Baseline:
        """What unrelated text scores against this query: the store's own memories (a fixed
        sample) and the reference sentences."""
        if vector is None or self.tuning.relevance is None:
            return Baseline()
        q = np.asarray(vector, dtype=np.float32)
        refs = self._reference_vectors(len(q))
        sampled, scores = rows.sample_cosines(vector, SAMPLE)
        if len(refs):
            scores = np.concatenate([scores, refs @ q])
        return Baseline(scores, sampled, len(refs), rows.vector_count())

    def _reference_vectors(self, dim: int) -> npt.NDArray[np.float32]:
        """REFERENCES embedded once per searcher (none if the embedder fails now)."""
        with self._references_lock:
            if self._references is None and self.embedder is not None:
                try:
                    found = np.asarray(self.embedder.embed(list(REFERENCES)), dtype=np.float32)
                except EmbedderError as exc:
                    logger.warning("reference sentences not embedded (%s)", exc)
                    return np.zeros((0, dim), dtype=np.float32)
                self._references = found
            refs = self._references
        if refs is None or refs.ndim != 2 or refs.shape[1] != dim:
            return np.zeros((0, dim), dtype=np.float32)
        return refs

    def _vectors_wanted(self, view: View) -> bool:
        """Whether this search ranks vectors too (else keywords alone, and no embedding)."""
        if self.embedder is None or self.tuning.keyword_weight >= 1:
            return False
        return self.vectors.complete(view)

    def _cosine(self, vector: list[float] | None, rows: Rows, f: Filter) -> tuple[Scored, Scored]:
        """Vector candidates: by the entry's own vector, and by its contextual neighbours'."""
        if vector is None:
            return [], []
        return rows.vector_top(vector, CANDIDATES, f.mask(rows), self.tuning.contextual)

    def _rerank(self, reranker: Reranker, text: str, ranked: Scored, view: View) -> Scored:
        """Deep search: the cross-encoder re-orders the top `rerank_depth` hits."""
        depth = self.tuning.rerank_depth
        head = ranked[:depth]  # ids of `view`'s entries (`ok` was read from it)
        try:
            scores = reranker.score(
                text, [e.content if (e := view.get(i)) else "" for i, _ in head]
            )
        except EmbedderError as exc:
            logger.warning("reranking failed (%s); hybrid order kept", exc)
            return ranked
        order = sorted(range(len(head)), key=lambda k: -scores[k])
        return [head[k] for k in order] + ranked[depth:]

    def _keywords(
        self,
        text: str,
        view: View,
        pending: Pending,
        f: Filter,
    ) -> tuple[Scored, dict[str, float]]:
        """Tantivy's best CANDIDATES plus the changes not checkpointed yet (`pending`, read
        before the index was searched), which override it; and the weights of those that
        pass the filter (none of either without a keyword search)."""
        if self.tuning.keyword_weight <= 0:
            return [], {}
        index = self.parts.index
        # a project's terms weighed by that project's statistics (`project_weights`)
        w = index.project_weights(text, f.project) if f.project is not None else None
        # the index's version of a pending entry is overridden: fetch more only when some
        # of the best were (most pending entries are new saves the index has never held;
        # fetching 100 + 512 hits cost half a millisecond of every search after a burst)
        hits = index.ids_of(index.lookup(text, CANDIDATES, f.category, f.tags, f.project, w))
        indexed = [h for h in hits if h[0] not in pending]
        if len(indexed) < len(hits) == CANDIDATES:
            more = CANDIDATES + len(pending)
            hits = index.search(text, more, f.category, f.tags, f.project, w)
            indexed = [h for h in hits if h[0] not in pending]
        merged = indexed + self._pending(text, view, pending, f, w)
        merged.sort(key=lambda h: (-h[1], h[0]))
        merged = merged[:CANDIDATES]
        return merged, _weights(view, merged, f)

    def _pending(
        self,
        text: str,
        view: View,
        pending: Pending,
        f: Filter,
        weights: Mapping[str, float] | None = None,
    ) -> Scored:
        """BM25 of the pending entries (as `view` has them) holding a query term. Their terms
        are analysed once and kept in the mirror's postings, unless the entry or a neighbour
        (whose text is in its context field) changed meanwhile; those, and any whose terms a
        change dropped since, are scored from terms analysed for this search alone."""
        m = self.parts.mirror
        index = self.parts.index
        extra: dict[str, DocTerms] = {}
        for entry_id in [i for i in pending if i not in m.terms]:  # not analysed yet
            entry = view.get(entry_id)
            if entry is not None and entry.live:
                ticket = m.terms.ticket(entry_id)  # before its neighbours' text is read
                terms = index.doc_terms(m.doc(entry))
                with m.lock:  # equal, not the same: a packed view rebuilds it on each read
                    now = m.view.get(entry_id)
                    current = (now is entry or now == entry) and entry_id in m.pending
                    if not (current and m.terms.put(entry_id, terms, ticket)):
                        extra[entry_id] = terms

        weigh = _weighing(view, f)  # read from the packed record: no entry rebuilt

        def keep(entry_id: str) -> bool:
            return entry_id in pending and weigh(entry_id) is not None

        with m.lock:  # no change drops terms while they are scored
            for entry_id in pending:
                if entry_id in m.terms or entry_id in extra:
                    continue  # (rebuilding every pending entry here cost 2-5 ms a search)
                entry = view.get(entry_id)
                if entry is not None and entry.live:
                    extra[entry_id] = index.doc_terms(m.doc(entry))
            scored = index.score_docs(text, m.terms, lambda i: i not in extra and keep(i), weights)
        return scored + index.score_docs(text, extra, keep, weights) if extra else scored

    def _query_vector(self, text: str) -> list[float] | None:
        if self.embedder is None:
            return None
        try:
            embed_query = getattr(self.embedder, "embed_query", None)
            if embed_query is not None:
                return embed_query(text)  # type: ignore[no-any-return]
            return self.embedder.embed([text])[0]
        except EmbedderError as exc:
            logger.warning("query embedding failed (%s); keyword search only", exc)
            return None


class _QueryWords:
    """The query's words by weight (`topical`) and how much of them each memory, or its
    neighbours, holds (`keyword_share`), worked out once per memory: the relevance rule's
    second judge."""

    def __init__(self, searcher: Searcher, text: str, view: View) -> None:
        m = searcher.parts.mirror
        self._searcher, self._view, self._mirror = searcher, view, m
        self.weights = topical(searcher.parts.index.term_weights(text, m.terms), text)
        self._held: dict[str, Words] = {}

    def of(self, entry_id: str) -> Words:
        held = self._held.get(entry_id)
        if held is None:
            held = self._held[entry_id] = self._share(entry_id)
        return held

    def _share(self, entry_id: str) -> Words:
        m = self._mirror
        terms = m.terms.get(entry_id)
        if terms is None:
            entry = self._view.get(entry_id)
            if entry is None:
                return Words(asked=len(self.weights))
            terms = self._searcher._terms_of(m.doc(entry))
        return keyword_share(self.weights, terms.counts, terms.context)

"""BM25 through Tantivy: the only module that imports tantivy.

Documents carry an id, the searchable body, category prefixes and tags. Queries are built
from our own tokens (never the query parser), so no user text can make a search raise.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tantivy

from dreamwell.stores.files import aside_name
from dreamwell.stores.index.postings import DocTerms, Postings
from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
from dreamwell.stores.model import category_prefixes, check_categories

logger = logging.getLogger(__name__)

_ANALYZER = "dreamwell"
_MAX_QUERY_TERMS = 256
_WRITER_HEAP = 15_000_000
# Han, Hiragana, Katakana, Hangul: no spaces between words, so each character is a token.
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff])")


_K1, _B = 1.2, 0.75  # Tantivy's BM25 parameters
_AVG_LEN = 16.0  # a typical memory's length in tokens, until the overlay says otherwise


CONTEXT_BOOST = 0.5  # weight of a match in the neighbours' text against one in the memory's
GLOBAL = "*"  # the project field of a global memory (no project key is "*")


@dataclass(frozen=True)
class IndexDoc:
    id: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    context: str = ""  # the text of the memories saved just before and after (contextual)
    project: str | None = None  # the key of its project (stores/projects.py); None: global


@dataclass(frozen=True)
class Found:
    """Tantivy's hits for one search, before their ids are read (see `TextIndex.lookup`)."""

    searcher: tantivy.Searcher | None
    hits: list[tuple[float, tantivy.DocAddress]]


def document_text(content: str, category: str | None, tags: Iterable[str]) -> str:
    """docs/recall.md: content + tags + category, with '/' and '-' read as spaces."""
    text = " ".join([content, " ".join(tags), category or ""])
    return text.replace("/", " ").replace("-", " ")


def _prepare(text: str) -> str:
    return _CJK.sub(r" \1 ", text)


def _analyzer(stopwords: Iterable[str] = ()) -> tantivy.TextAnalyzer:
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(60))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
    )
    if stopwords:
        builder = builder.filter(tantivy.Filter.custom_stopword(sorted(stopwords)))
    return builder.filter(tantivy.Filter.stemmer("english")).build()


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("body", stored=False, tokenizer_name=_ANALYZER)
    builder.add_text_field("cat", stored=False, tokenizer_name="raw")
    builder.add_text_field("tag", stored=False, tokenizer_name="raw")
    builder.add_text_field("ctx", stored=False, tokenizer_name=_ANALYZER)
    builder.add_text_field("proj", stored=False, tokenizer_name="raw")
    return builder.build()


def _idf(total: int, df: int) -> float:
    """BM25's IDF, as Tantivy computes it."""
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


def _count(searcher: tantivy.Searcher, query: tantivy.Query) -> int:
    """How many documents match `query` (the stubs do not name SearchResult.count)."""
    found: object = searcher.search(query, 1, count=True)
    return int(getattr(found, "count", 0) or 0)


def _weighed(schema: tantivy.Schema, field: str, term: str, boost: float) -> tantivy.Query:
    query = tantivy.Query.term_query(schema, field, term)
    return query if boost == 1.0 else tantivy.Query.boost_query(query, boost)


def _distinct(analyzer: tantivy.TextAnalyzer, text: str) -> list[str]:
    seen: dict[str, None] = {}
    for term in analyzer.analyze(text):
        seen.setdefault(term, None)
        if len(seen) >= _MAX_QUERY_TERMS:
            break
    return list(seen)


def _filters(
    schema: tantivy.Schema,
    category: str | Iterable[str] | None,
    tags: Iterable[str],
    project: str | None,
) -> list[tuple[tantivy.Occur, tantivy.Query]]:
    out = []
    if project is not None:  # the project's own memories, or global ones
        either = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "proj", value))
            for value in (project, GLOBAL)
        ]
        out.append((tantivy.Occur.Must, tantivy.Query.boolean_query(either)))
    if cats := check_categories(category):  # under any one of them
        under = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "cat", c)) for c in cats]
        out.append((tantivy.Occur.Must, tantivy.Query.boolean_query(under)))
    for tag in tags:
        out.append((tantivy.Occur.Must, tantivy.Query.term_query(schema, "tag", tag)))
    return out


class IndexWriter:
    """A writer held only for one batch of changes (Tantivy allows one writer per index)."""

    def __init__(self, writer: tantivy.IndexWriter) -> None:
        self._writer = writer

    def upsert(self, doc: IndexDoc) -> None:
        self.delete(doc.id)
        self._writer.add_document(
            tantivy.Document(
                id=doc.id,
                body=_prepare(document_text(doc.content, doc.category, doc.tags)),
                cat=category_prefixes(doc.category),
                tag=list(doc.tags),
                ctx=_prepare(doc.context),
                proj=doc.project or GLOBAL,
            )
        )

    def delete(self, doc_id: str) -> None:
        self._writer.delete_documents_by_term("id", doc_id)

    def clear(self) -> None:
        self._writer.delete_all_documents()


class TextIndex:
    """A Tantivy index on disk (`path`) or in RAM (`path=None`)."""

    def __init__(self, path: Path | None, repair: bool = True) -> None:
        """Without `repair` (a reader beside the stores' owner, e.g. a client hook) an index
        that is missing, older or unreadable raises ValueError instead of being replaced."""
        self._path = path
        self._analyzer = _analyzer()
        self._query_analyzer = _analyzer(ENGLISH_STOPWORDS)
        self.in_ram = path is None  # also True when the directory cannot be written
        self.damaged = False  # a search found a file it cannot read: rebuild
        self._index = self._open() if repair else self._open_as_is()

    def _open_as_is(self) -> tantivy.Index:
        if self._path is None or not tantivy.Index.exists(str(self._path)):
            raise ValueError(f"no text index at {self._path}")
        index = tantivy.Index(_schema(), path=str(self._path), reuse=True)
        index.register_tokenizer(_ANALYZER, self._analyzer)
        return index

    def _writable(self) -> bool:
        assert self._path is not None
        try:
            self._path.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return os.access(self._path, os.W_OK)

    def _open(self) -> tantivy.Index:
        schema = _schema()
        if self._path is None or not self._writable():
            if self._path is not None:  # Tantivy needs its lock files: search a copy in RAM
                logger.warning("text index at %s is read-only; searching a copy in RAM", self._path)
            self.in_ram = True
            index = tantivy.Index(schema)
        else:
            try:
                index = tantivy.Index(schema, path=str(self._path), reuse=True)
            except ValueError as exc:  # derived from the records: rebuilt from LanceDB
                if "schema does not match" in str(exc):  # made by an earlier dreamwell
                    logger.warning("text index at %s has an older layout; rebuilding", self._path)
                    shutil.rmtree(self._path)
                    self._path.mkdir(parents=True)
                else:
                    logger.warning("text index at %s is unreadable (%s)", self._path, exc)
                    self._set_aside()
                index = tantivy.Index(schema, path=str(self._path), reuse=False)
        index.register_tokenizer(_ANALYZER, self._analyzer)
        return index

    def recreate(self) -> None:
        """Throw the on-disk index away and start empty (used when it is corrupt)."""
        if self._path is not None and not self.in_ram:
            self._set_aside()
        self._index = self._open()

    def _set_aside(self) -> None:
        """Move a damaged index directory to `index.corrupt-<time>` (kept for inspection, never
        deleted; the index is derived and rebuilt from the records) and start an empty one."""
        assert self._path is not None
        target = aside_name(self._path)
        os.replace(self._path, target)
        logger.warning("the damaged text index was kept as %s", target)
        self._path.mkdir(parents=True)

    @contextmanager
    def writing(self) -> Iterator[IndexWriter]:
        """Open a writer, yield it, commit and release it. Callers hold the store's lock."""
        writer = self._index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        try:
            yield IndexWriter(writer)
            writer.commit()
        except BaseException:
            writer.rollback()
            raise
        finally:
            writer.wait_merging_threads()
        self._index.reload()

    def reload(self) -> None:
        self._index.reload()

    def in_step(self, live: int) -> bool:
        """True when the index holds `live` documents and can be searched."""
        if self.damaged:
            return False
        try:
            self._index.reload()
            return self.doc_count() == live
        except (ValueError, OSError, RuntimeError):
            return False

    def rebuild(self, docs: Iterable[IndexDoc]) -> None:
        """Replace every document with `docs` in one commit (recreating a damaged index)."""
        docs = list(docs)
        self.damaged = False
        try:
            with self.writing() as writer:
                writer.clear()
                for doc in docs:
                    writer.upsert(doc)
        except (ValueError, OSError, RuntimeError) as exc:
            logger.warning("text index at %s is damaged (%s); recreating it", self._path, exc)
            self.recreate()
            with self.writing() as writer:
                for doc in docs:
                    writer.upsert(doc)

    def doc_count(self) -> int:
        return int(self._index.searcher().num_docs)

    def ids(self) -> set[str]:
        """Every document id in the index (a check after damage, not a hot path)."""
        searcher = self._index.searcher()
        if not searcher.num_docs:
            return set()
        hits = searcher.search(tantivy.Query.all_query(), limit=searcher.num_docs).hits
        return {str(searcher.doc(address)["id"][0]) for _, address in hits}

    def doc_terms(self, doc: IndexDoc) -> DocTerms:
        tokens = self._analyzer.analyze(
            _prepare(document_text(doc.content, doc.category, doc.tags))
        )
        context = self._analyzer.analyze(_prepare(doc.context)) if doc.context else []
        return DocTerms(Counter(tokens), len(tokens), Counter(context), len(context))

    def project_weights(self, query: str, project: str) -> dict[str, float]:
        """Per query term, the ratio of its IDF among `project`'s and the global memories to
        its IDF in the whole index: a project's search weighs its terms as if the index held
        only what that search can return, so one data directory of many projects ranks each
        as a directory of its own would (a name frequent in one project is no rarity there).
        Empty when the index is (the pending entries are weighed by the index alone)."""
        searcher = self._index.searcher()
        total = searcher.num_docs
        terms = self.terms(query)
        if not total or not terms:
            return {}
        schema = self._index.schema
        scope = _filters(schema, None, (), project)
        in_scope = _count(searcher, tantivy.Query.boolean_query(scope))
        weights: dict[str, float] = {}
        for term in terms:
            df = searcher.doc_freq("body", term)
            held = tantivy.Query.term_query(schema, "body", term)
            mine = _count(
                searcher, tantivy.Query.boolean_query([(tantivy.Occur.Must, held), *scope])
            )
            overall = _idf(total, df)
            weights[term] = _idf(in_scope, mine) / overall if overall > 0 and in_scope else 1.0
        return weights

    def score_docs(
        self,
        query: str,
        docs: Mapping[str, DocTerms] | Postings,
        keep: Callable[[str], bool] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """BM25 of documents that are not in the index yet, with the index's own statistics
        (document frequencies and count) plus theirs, so the scores compare with search()'s.
        Only the documents holding a query term are looked at; `keep` filters those.
        `weights` (`project_weights`) scale each term as `search` does."""
        terms = self.terms(query)
        if not terms or not len(docs):
            return []
        postings = docs if isinstance(docs, Postings) else Postings(docs)
        searcher = self._index.searcher()
        total = searcher.num_docs + len(postings)
        scores: dict[str, float] = {}
        for name, boost in (("body", 1.0), ("ctx", CONTEXT_BOOST)):
            avg = postings.average_length(name, at_least=8) or _AVG_LEN
            for term in terms:
                holding = postings.holding(name, term)
                if not holding:
                    continue
                df = searcher.doc_freq(name, term) + len(holding)
                idf = _idf(total, df) * (weights.get(term, 1.0) if weights else 1.0)
                for doc_id, (count, length) in holding.items():
                    norm = _K1 * (1 - _B + _B * length / avg)
                    score = boost * idf * count * (_K1 + 1) / (count + norm)
                    scores[doc_id] = scores.get(doc_id, 0.0) + score
        return [(i, v) for i, v in scores.items() if v > 0 and (keep is None or keep(i))]

    def term_weights(self, query: str, pending: Postings | None = None) -> dict[str, float]:
        """Each query term's inverse document frequency, as BM25 weighs it (the index's
        documents plus `pending`'s): what a hit's share of the query's words is measured in
        (`stores/index/relevance.py`). A term no document holds weighs most."""
        terms = self.terms(query)
        if not terms:
            return {}
        searcher = self._index.searcher()
        total = searcher.num_docs + (len(pending) if pending is not None else 0)
        weights = {}
        for term in terms:
            df = searcher.doc_freq("body", term)
            if pending is not None:
                df += len(pending.holding("body", term))
            weights[term] = _idf(total, df)
        return weights

    def terms(self, text: str) -> list[str]:
        """The distinct index terms of query `text`, in order, capped: English stop-words are
        dropped unless the query is made only of them (stored text keeps every word)."""
        prepared = _prepare(text)
        return _distinct(self._query_analyzer, prepared) or _distinct(self._analyzer, prepared)

    def search(
        self,
        query: str,
        limit: int,
        category: str | Iterable[str] | None = None,
        tags: Iterable[str] = (),
        project: str | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """(id, bm25) best first; filters apply before the top-k cut. No terms: no hits.
        With `project`, only that project's memories and global ones."""
        return self.ids_of(self.lookup(query, limit, category, tags, project, weights))

    def lookup(
        self,
        query: str,
        limit: int,
        category: str | Iterable[str] | None = None,
        tags: Iterable[str] = (),
        project: str | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> Found:
        """The first half of `search`: Tantivy's top `limit` as document addresses. It holds
        the GIL only to build the query, so it can run on another thread beside numpy work;
        `ids_of` (many short calls into Tantivy, each holding the GIL) is best run while the
        other thread is in code that releases it (a search: while the query is embedded)."""
        terms = self.terms(query)
        if not terms or limit <= 0:
            return Found(None, [])
        schema = self._index.schema
        weight = weights or {}
        should = [
            (tantivy.Occur.Should, _weighed(schema, "body", term, weight.get(term, 1.0)))
            for term in terms
        ] + [
            (
                tantivy.Occur.Should,
                _weighed(schema, "ctx", term, CONTEXT_BOOST * weight.get(term, 1.0)),
            )
            for term in terms
        ]
        query_terms = tantivy.Query.boolean_query(should)
        filters = _filters(schema, category, tags, project)
        # the terms alone when nothing filters: the same scores, and Tantivy prunes a plain
        # union of terms faster than one wrapped as a required clause (7.6 -> 6.1 ms a
        # LoCoMo question at a million memories)
        if filters:
            query_terms = tantivy.Query.boolean_query([(tantivy.Occur.Must, query_terms), *filters])
        try:
            searcher = self._index.searcher()
            return Found(searcher, searcher.search(query_terms, limit).hits)
        except (ValueError, OSError, RuntimeError) as exc:  # a damaged segment file
            self._found_damage(exc)
            return Found(None, [])

    def ids_of(self, found: Found) -> list[tuple[str, float]]:
        """(id, bm25) of a `lookup`'s hits, best first."""
        searcher = found.searcher
        if searcher is None:
            return []
        try:
            return [(str(searcher.doc(addr)["id"][0]), float(score)) for score, addr in found.hits]
        except (ValueError, OSError, RuntimeError) as exc:
            self._found_damage(exc)
            return []

    def _found_damage(self, exc: Exception) -> None:
        logger.error("the text index at %s is damaged (%s); it is rebuilt", self._path, exc)
        self.damaged = True

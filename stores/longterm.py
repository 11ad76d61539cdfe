"""Long-term memory: a write-ahead log in front of LanceDB records and a Tantivy index.

Writes: a save, delete or batch takes `write.lock`, reads the log to its end, decides (the
duplicate check, compare-and-set of background writers), appends one record per commit with
one fsync, and replies. Saves that arrive together share that fsync (group commit). Nothing
else is on the reply path: vectors are computed afterwards and logged as their own records,
and a checkpoint folds the log into LanceDB (one upsert) and Tantivy (one commit) in batches,
under `checkpoint.lock`, without holding up saves.

The log is behind `stores/log.py`'s `Log` interface; `stores/wal.py` is the local one.

Reads never take a file lock: every process tails the log, applies new records to an
immutable `View` that it swaps in, and searches Tantivy plus the records not yet
checkpointed (scored with the index's own statistics). A log segment deleted before a slow
process read it is made good from LanceDB through the state file's journal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

import numpy as np
from filelock import FileLock

from dreamwell.stores import ops
from dreamwell.stores.catchup import Follower
from dreamwell.stores.checkpoint import CHECKPOINT_SECONDS, KEEP_VERSIONS, Checkpointer
from dreamwell.stores.commit import GroupCommit, Scratch
from dreamwell.stores.embedding import Embedder, EmbedderError, Reranker
from dreamwell.stores.fold import fold
from dreamwell.stores.layout import DataDir
from dreamwell.stores.log import Log, Op
from dreamwell.stores.mirror import Mirror
from dreamwell.stores.model import (
    MemoryEntry,
    Vector,
    check_category,
    check_query,
    check_tags,
)
from dreamwell.stores.parts import Parts
from dreamwell.stores.ranking import CONTEXT_WEIGHT, KEYWORD_WEIGHT, rank_hits
from dreamwell.stores.repair import Repair
from dreamwell.stores.state import StateFile
from dreamwell.stores.table import MemoryTable
from dreamwell.stores.text_index import DocTerms, TextIndex
from dreamwell.stores.view import Rows, View, from_bf16
from dreamwell.stores.wal import Wal
from dreamwell.stores.writer import ANY, SaveResult, Write, Writer

__all__ = [
    "ANY",
    "CHECKPOINT_SECONDS",
    "Hit",
    "LongTermStore",
    "SaveResult",
    "Write",
    "matches",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_CANDIDATES = 100
SEARCH_EMBEDS = 512  # a search embeds at most this many entries the backfill has not reached


@dataclass(frozen=True)
class Hit:
    entry: MemoryEntry
    score: float


def matches(e: MemoryEntry, category: str | None, tags: Sequence[str]) -> bool:
    """Live, under the category prefix (segment boundary) and carrying every tag."""
    if not e.live or not all(t in e.tags for t in tags):
        return False
    cat = e.category or ""
    return category is None or cat == category or cat.startswith(category + "/")


class LongTermStore:
    def __init__(
        self,
        data_dir: Path,
        *,
        embedder: Embedder | None = None,
        embed_on_save: bool = False,
        min_similarity: float = 0.0,
        keyword_weight: float = KEYWORD_WEIGHT,
        lock_timeout: float = 15.0,
        reranker: Reranker | None = None,
        rerank_depth: int = 20,
        contextual: bool = True,
        wait_for_model: bool = True,
        on_vectors_wanted: Callable[[], None] | None = None,
    ) -> None:
        """Opening only reads. `embedder` adds vector recall; with `embed_on_save` a save
        embeds its text before it replies, else `backfill()` embeds in the background. With
        `contextual`, a memory saved by a caller within minutes of its previous one, in the
        same category, is linked to it, and each is also found through the other's words and
        meaning. Without `wait_for_model`, a search while the embedder's model is still
        loading (a server warming it after start-up) ranks by keywords instead of waiting.
        `on_vectors_wanted` is called, from whichever thread, when `vectors_wanted` becomes
        set: the background backfill can sleep until then instead of polling."""
        self.dirs = DataDir(Path(data_dir))
        self.dirs.ensure()
        self.data_dir = self.dirs.root
        self.embedder = embedder
        self.embed_on_save = embed_on_save
        self.min_similarity = min_similarity
        self.keyword_weight = keyword_weight
        self.reranker = reranker
        self.rerank_depth = rerank_depth
        self.contextual = contextual
        self.wait_for_model = wait_for_model
        self._state = StateFile(self.dirs.state)
        self._table = MemoryTable(self.dirs.lancedb)
        self._index = TextIndex(self.dirs.index)
        self._wal: Log = Wal(self.dirs.wal, self.dirs.write_lock, lock_timeout)
        self._mirror = Mirror(embedder.name if embedder else None, on_vectors_wanted)
        self.vectors_wanted = self._mirror.vectors_wanted
        self._follower = Follower(self._mirror, self._wal, self._state, self._table, self._index)
        self._parts = Parts(
            self.dirs,
            self._wal,
            self._state,
            self._table,
            self._index,
            self._mirror,
            self._follower,
            FileLock(str(self.dirs.checkpoint_lock), timeout=lock_timeout),
            lock_timeout,
        )
        repair = Repair(self._parts)
        self._checkpointer = Checkpointer(self._parts, repair)
        self._group = GroupCommit(self._parts)
        self._writer = Writer(self._parts, self._group, embedder, embed_on_save, contextual)
        self._follower.load()
        repair.check_table()
        repair.index()

    # ---- loading and catching up --------------------------------------------------------------
    @property
    def vectors_loaded(self) -> bool:
        """Whether this embedder's stored vectors are in memory (always, without one)."""
        return self._mirror.vectors_ready

    def load_vectors(self) -> None:
        """Read this embedder's vectors from LanceDB into memory (after start-up: searches
        meanwhile are keyword-only). Vectors of edited text are left out and re-embedded."""
        if self.embedder is None or self._mirror.vectors_ready:
            return
        stored = self._table.vectors(self.embedder.name)
        with self._mirror.lock:
            self._mirror.adopt(stored)
            self._mirror.vectors_ready = True
        if self.missing_vectors():
            self._mirror.want_vectors()

    # ---- writing --------------------------------------------------------------------------------
    def save(
        self,
        content: str,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        now: datetime | None = None,
        caller: str | None = None,
    ) -> SaveResult:
        """Save a memory, or reinforce the live entry with the same folded text and category.
        `caller` (the saver's namespace) links it to that caller's previous memory when it
        came at most CONTEXT_SECONDS before, in the same category (contextual memories)."""
        return self._writer.save(content, category, tags, metadata, now, caller)

    def delete(self, entry_id: str) -> MemoryEntry:
        return self._writer.delete(entry_id)

    def write(self, groups: Sequence[Sequence[Write]]) -> list[bool]:
        """Compare-and-set: each group is written whole if every entry in it still equals its
        `expect`, else not at all. One log record per group, one fsync for all. Returns, per
        group, whether it was written. Background writers (the dream, undo, import) use this
        so they never overwrite, or bring back, what a user changed meanwhile."""
        return self._writer.write(groups)

    def apply(self, upserts: Sequence[MemoryEntry] = (), deletes: Sequence[str] = ()) -> None:
        """Write whole entries and hard-delete ids unconditionally, in one commit."""
        writes = [Write(e.id, ANY, e) for e in upserts] + [Write(i, ANY, None) for i in deletes]
        self.write([writes])

    # ---- vectors --------------------------------------------------------------------------------
    def backfill(self, batch: int = 64) -> int:
        """Embed up to `batch` live entries that have no vector from the current embedder and
        log the vectors. Returns how many got one; 0 when nothing is missing or the embedder
        is unavailable."""
        if self.embedder is None:
            return 0
        # cleared before looking, not after finding nothing: an entry saved in between sets
        # it again, so its wake-up is not lost
        self.vectors_wanted.clear()
        self.load_vectors()
        self._follower.fresh()
        view = self._mirror.view
        missing: list[MemoryEntry] = []
        for entry_id in list(self._mirror.unlogged):  # embedded by a search, not logged yet
            entry = view.get(entry_id)
            if entry is not None and entry.live and len(missing) < batch:
                missing.append(entry)
        for entry_id in self._mirror.rows.without_vector(batch - len(missing)):
            entry = view.get(entry_id)
            if entry is not None and entry.live:
                missing.append(entry)
        if not missing:
            return 0
        try:
            vectors = self.embedder.embed([e.content for e in missing])
        except EmbedderError as exc:
            logger.warning("backfill paused: %s", exc)
            return 0
        model = self.embedder.name

        def plan(s: Scratch) -> tuple[list[Op], int]:
            planned = [
                ops.vec_op(e, model, v)
                for e, v in zip(missing, vectors, strict=True)
                if (now := s.get(e.id)) is not None and now.live and now.content == e.content
            ]
            return planned, len(planned)

        return self._group.commit(plan)

    def vectors(self, model: str) -> dict[str, Vector]:
        """Every entry's vector made by `model`: the current embedder's as held in memory
        (pending ones included), another model's as stored in LanceDB. Rows of one copied
        matrix, so the caller may keep them while the store goes on changing."""
        if self.embedder is not None and model == self.embedder.name:
            self.load_vectors()
            self._follower.fresh()
            with self._mirror.lock:
                rows = self._mirror.rows
                if rows.vec is None:
                    return {}
                n = rows.n
                have = np.flatnonzero(rows.has_vec[:n])
                matrix = from_bf16(rows.vec[have])  # a new array
                ids = [rows.ids[r] for r in have.tolist()]
            return {entry_id: matrix[k] for k, entry_id in enumerate(ids)}
        return {
            i: np.asarray(v.values, dtype=np.float32) for i, v in self._table.vectors(model).items()
        }

    def missing_vectors(self) -> int:
        if self.embedder is None:
            return 0
        self._follower.fresh()
        return (
            self._mirror.view.live_count
            - self._mirror.rows.vector_count()
            + len(self._mirror.unlogged)
        )

    # ---- checkpoints ----------------------------------------------------------------------------
    def checkpoint_due(self, max_age: float = CHECKPOINT_SECONDS) -> bool:
        """Enough changes are pending, or the oldest has waited `max_age` seconds."""
        return self._checkpointer.due(max_age)

    def checkpoint(self, wait: bool = True) -> bool:
        """Fold the log into LanceDB and Tantivy and drop the folded segments. Returns False
        when another process is doing it (with wait=False) or there was nothing to fold."""
        return self._checkpointer.checkpoint(wait)

    def maintain(self, keep_versions_for: timedelta = KEEP_VERSIONS) -> None:
        """Checkpoint, then compact LanceDB and drop old versions."""
        self._checkpointer.maintain(keep_versions_for)

    def reindex(self) -> None:
        """Rebuild the Tantivy index from LanceDB (after a checkpoint)."""
        self._checkpointer.reindex()

    def version(self) -> int:
        """The LanceDB table version: changes with every checkpoint by any process."""
        return self._table.version

    def index_documents(self) -> int:
        return self._index.doc_count()

    def index_ids(self) -> set[str]:
        """The ids the Tantivy index holds (a consistency check, not a hot path)."""
        return self._index.ids()

    def index_in_step(self) -> bool:
        """The text index holds as many documents as LanceDB holds live records (both as of
        the last checkpoint; the log's pending changes are searched beside the index)."""
        return self._index.in_step(self._table.count_live())

    def pending(self) -> int:
        """Changes logged but not yet folded into LanceDB and Tantivy."""
        return len(self._mirror.pending)

    # ---- reads ----------------------------------------------------------------------------------
    def get(self, entry_id: str) -> MemoryEntry | None:
        self._follower.fresh()
        return self._mirror.view.get(entry_id)

    def entries(self, include_archived: bool = False) -> list[MemoryEntry]:
        self._follower.fresh()
        return [e for e in self._mirror.view.values() if include_archived or e.live]

    def count(self) -> int:
        self._follower.fresh()
        return self._mirror.view.live_count

    def categories(self) -> list[tuple[str, int]]:
        self._follower.fresh()
        return sorted(
            self._mirror.view.categories.items(), key=lambda kv: (kv[0].casefold(), kv[0])
        )

    def search(
        self,
        query: str | None = None,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        limit: int = 20,
    ) -> list[Hit]:
        """Hybrid-ranked live entries for `query`; with no query, the most recently seen."""
        text = check_query(query)
        category = check_category(category)
        tag_list = check_tags(tags)
        self._follower.fresh()
        view, rows = self._mirror.view, self._mirror.rows
        if not text:
            mask = rows.mask(category, tag_list)
            found = (view.get(i) for i in rows.recent(limit * 2, mask))
            return [Hit(e, 0.0) for e in found if e is not None and matches(e, category, tag_list)][
                :limit
            ]
        bm25 = self._keyword(text, view, category, tag_list) if self.keyword_weight > 0 else []
        cosine: list[tuple[str, float]] = []
        context: list[tuple[str, float]] = []
        if self.keyword_weight < 1 and self._vectors_complete(view):
            query_vector = self._query_vector(text)
            if query_vector is not None:
                cosine, context = rows.vector_top(
                    query_vector, _CANDIDATES, rows.mask(category, tag_list), self.contextual
                )
        candidates = [*bm25, *cosine, *context]
        entries = {i: e for i, _ in candidates if (e := view.get(i)) is not None}
        ok = {i: e for i, e in entries.items() if matches(e, category, tag_list)}
        importance = {i: e.importance for i, e in ok.items()}
        bm25 = [h for h in bm25 if h[0] in ok]
        cosine = [h for h in cosine if h[0] in ok]
        context = [h for h in context if h[0] in ok]
        ranked = rank_hits(
            bm25,
            cosine,
            importance,
            self.min_similarity,
            self.keyword_weight,
            contextual=context,
            context_weight=CONTEXT_WEIGHT,
        )
        if self.reranker is not None:
            ranked = self._rerank(text, ranked, ok)
        return [Hit(ok[i], s) for i, s in ranked[:limit]]

    def _rerank(
        self, text: str, ranked: list[tuple[str, float]], entries: Mapping[str, MemoryEntry]
    ) -> list[tuple[str, float]]:
        """Deep search: the cross-encoder re-orders the top `rerank_depth` hits."""
        assert self.reranker is not None
        head = ranked[: self.rerank_depth]
        try:
            scores = self.reranker.score(text, [entries[i].content for i, _ in head])
        except EmbedderError as exc:
            logger.warning("reranking failed (%s); hybrid order kept", exc)
            return ranked
        order = sorted(range(len(head)), key=lambda k: -scores[k])
        return [head[k] for k in order] + ranked[self.rerank_depth :]

    def _vectors_complete(self, view: View) -> bool:
        """Whether every live entry has a vector, embedding the few the background backfill
        has not reached yet (in memory only: a search writes nothing). A partial set of
        vectors would distort the blend, so with many missing the search is BM25 only."""
        if self.embedder is None or not self._mirror.vectors_ready:
            return False
        if not self.wait_for_model and not getattr(self.embedder, "ready", True):
            return False  # the model is still loading: keywords now rather than a wait
        rows = self._mirror.rows
        missing = rows.without_vector(SEARCH_EMBEDS + 1)
        if not missing:
            return bool(rows.n)
        if len(missing) > SEARCH_EMBEDS:
            return False
        entries = [e for i in missing if (e := view.get(i)) is not None and e.live]
        try:
            vectors = self.embedder.embed([e.content for e in entries])
        except EmbedderError as exc:
            logger.warning("embedding at search time failed (%s); keyword search only", exc)
            return False
        with self._mirror.lock:
            for entry, vector in zip(entries, vectors, strict=True):
                current = self._mirror.view.get(entry.id)
                if current is not None and current.content == entry.content:
                    self._mirror.rows.set_vector(entry.id, self.embedder.name, vector)
                    self._mirror.unlogged.add(entry.id)
        return True

    def _keyword(
        self, text: str, view: View, category: str | None, tags: Sequence[str]
    ) -> list[tuple[str, float]]:
        """BM25 over the index plus the changes not checkpointed yet (which override it)."""
        pending = self._mirror.pending
        # the index's version of a pending entry is overridden: fetch more only when some
        # of the best were (most pending entries are new saves the index has never held;
        # fetching 100 + 512 hits cost half a millisecond of every search after a burst)
        hits = self._index.search(text, _CANDIDATES, category, tags)
        indexed = [h for h in hits if h[0] not in pending]
        if len(indexed) < len(hits) == _CANDIDATES:
            hits = self._index.search(text, _CANDIDATES + len(pending), category, tags)
            indexed = [h for h in hits if h[0] not in pending]
        docs: dict[str, DocTerms] = {}
        for entry_id in pending:
            entry = view.get(entry_id)
            if entry is None or not matches(entry, category, tags):
                continue
            terms = self._mirror.terms.get(entry_id)
            if terms is None:
                terms = self._index.doc_terms(self._mirror.doc(entry))
                self._mirror.terms[entry_id] = terms
            docs[entry_id] = terms
        merged = indexed + self._index.score_docs(text, docs)
        merged.sort(key=lambda h: (-h[1], h[0]))
        return merged[:_CANDIDATES]

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

    # ---- for tests that reach inside ------------------------------------------------------------
    @property
    def _rows(self) -> Rows:
        return self._mirror.rows

    @property
    def _terms(self) -> dict[str, DocTerms]:
        return self._mirror.terms

    def _fold(self, start: int, end: int) -> set[str]:
        return fold(self._parts, start, end)

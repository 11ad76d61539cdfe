"""Long-term memory: LanceDB records, a derived Tantivy index, safe across processes.

Every write happens under the data directory's write lock and ends by bumping a generation
number in `longterm.state` together with the LanceDB version it produced. Readers compare
generations (one small file read) and reload when another process wrote. A writer that finds
the LanceDB version out of step with the state (a process died mid-write) rebuilds the index.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from filelock import FileLock, Timeout

from dreamwell.stores.embedding import Embedder, EmbedderError
from dreamwell.stores.errors import NotFound, StoreBusy
from dreamwell.stores.model import (
    MAX_TAGS,
    MemoryEntry,
    check_category,
    check_content,
    check_query,
    check_tags,
    fold_text,
    new_id,
    utcnow,
)
from dreamwell.stores.ranking import KEYWORD_WEIGHT, rank_hits
from dreamwell.stores.state import State, StateFile
from dreamwell.stores.table import MemoryTable
from dreamwell.stores.text_index import IndexDoc, TextIndex
from dreamwell.stores.vectors import VectorMirror

logger = logging.getLogger(__name__)

_CANDIDATES = 100


@dataclass(frozen=True)
class SaveResult:
    entry: MemoryEntry
    reinforced: bool


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


def _dup_key(category: str | None, content: str) -> tuple[str, str]:
    return (category or "", fold_text(content) or content)


class LongTermStore:
    def __init__(
        self,
        data_dir: Path,
        *,
        embedder: Embedder | None = None,
        embed_on_save: bool = True,
        min_similarity: float = 0.0,
        keyword_weight: float = KEYWORD_WEIGHT,
        lock_timeout: float = 15.0,
    ) -> None:
        """`embedder` adds vector recall; with `embed_on_save` a save embeds its text before
        writing (the embedded model needs ~5 ms), else `backfill()` embeds in the background."""
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        self.embedder = embedder
        self.embed_on_save = embed_on_save
        self.min_similarity = min_similarity
        self.keyword_weight = keyword_weight
        self._mutex = threading.RLock()
        self._flock = FileLock(str(data_dir / "write.lock"), timeout=lock_timeout)
        self._state = StateFile(data_dir / "longterm.state")
        self._table = MemoryTable(data_dir / "lancedb")
        self._index = TextIndex(data_dir / "index")
        self._entries: dict[str, MemoryEntry] = {}
        self._dups: dict[tuple[str, str], str] = {}
        self._vectors = VectorMirror()
        self._generation = -1
        self._touched: set[str] = set()
        with self._writing(check_index=True):
            pass

    # ---- coordination -------------------------------------------------------------------
    def _catch_up(self, state: State) -> None:
        """Load what other processes changed: just the journalled ids when the journal covers
        every generation since ours, else everything."""
        ids = state.changed_since(self._generation)
        if ids is None:
            self._load_entries()
        else:
            found = {e.id: e for e in self._table.get(sorted(ids))}
            self._forget(ids - found.keys())
            self._remember(found.values())
            if self.embedder is not None:
                self._vectors.put(self._table.vectors(self.embedder.name, sorted(found)))
        self._index.reload()

    def _load_entries(self) -> None:
        self._entries = {e.id: e for e in self._table.entries()}
        if self.embedder is not None:
            self._vectors.replace_all(self._table.vectors(self.embedder.name))
            self._vectors.drop(i for i, e in self._entries.items() if not e.live)
        self._dups = {
            _dup_key(e.category, e.content): e.id for e in self._entries.values() if e.live
        }

    def _rebuild_index(self) -> None:
        logger.info("rebuilding the text index from %d records", len(self._entries))
        try:
            self._write_index(self._entries.values(), clear=True)
        except (ValueError, OSError, RuntimeError):
            self._index.recreate()
            self._write_index(self._entries.values(), clear=True)

    def _write_index(
        self, entries: Iterable[MemoryEntry], clear: bool = False, removed: Iterable[str] = ()
    ) -> None:
        with self._index.writing() as writer:
            if clear:
                writer.clear()
            for doc_id in removed:
                writer.delete(doc_id)
            for e in entries:
                if e.live:
                    writer.upsert(IndexDoc(e.id, e.content, e.category, e.tags))
                else:
                    writer.delete(e.id)

    def _index_in_step(self) -> bool:
        try:
            self._index.reload()
            live = sum(1 for e in self._entries.values() if e.live)
            return self._index.doc_count() == live
        except (ValueError, OSError, RuntimeError):
            self._index.recreate()
            return False

    @contextmanager
    def _writing(self, check_index: bool = False) -> Iterator[None]:
        with self._mutex:
            try:
                self._flock.acquire()
            except Timeout as exc:
                raise StoreBusy(
                    "the memory store is locked by another process; try again in a moment."
                ) from exc
            try:
                state = self._state.read()
                version = self._table.version
                if check_index or state.version != version or self._generation == -1:
                    self._load_entries()
                    if state.version != version or not self._index_in_step():
                        self._rebuild_index()
                elif state.generation != self._generation:
                    self._catch_up(state)
                generation = max(state.generation, self._generation) + 1
                self._touched = set()
                try:
                    yield
                except BaseException:
                    self._generation = -1  # reload everything before the next use
                    raise
                self._state.write(state, generation, self._table.version, self._touched)
                self._generation = generation
            finally:
                self._flock.release()

    def _fresh(self) -> None:
        """Pick up what other processes wrote (one stat() when nothing changed)."""
        if self._generation != -1 and self._state.unchanged():
            return
        state = self._state.read()
        if state.generation != self._generation or self._generation == -1:
            with self._mutex:
                self._catch_up(state)
                self._generation = state.generation

    # ---- writes ---------------------------------------------------------------------------
    def save(
        self,
        content: str,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        now: datetime | None = None,
    ) -> SaveResult:
        """Save a memory, or reinforce the live entry with the same folded text and category."""
        content = check_content(content)
        category = check_category(category)
        tag_list = check_tags(tags)
        now = now or utcnow()
        with self._mutex:
            known = self._dups.get(_dup_key(category, content))
        vectors = self._embed([content]) if known is None else {}
        with self._writing():
            existing_id = self._dups.get(_dup_key(category, content))
            if existing_id is not None:
                old = self._entries[existing_id]
                merged_tags = tuple(dict.fromkeys(old.tags + tag_list))[:MAX_TAGS]
                entry = replace(
                    old,
                    tags=merged_tags,
                    last_seen_at=max(now, old.last_seen_at),
                    updated_at=now,
                    reinforcement_count=old.reinforcement_count + 1,
                )
                self._table.update([entry])
                if merged_tags != old.tags:
                    self._write_index([entry])
                self._remember([entry])
                return SaveResult(entry, reinforced=True)
            entry = MemoryEntry(
                id=new_id(),
                content=content,
                category=category,
                tags=tag_list,
                created_at=now,
                updated_at=now,
                last_seen_at=now,
                metadata=dict(metadata or {}),
            )
            vector = vectors.get(content)
            self._table.add([entry], [vector], self.embedder.name if self.embedder else None)
            self._write_index([entry])
            self._remember([entry])
            if vector is not None:
                self._vectors.put({entry.id: vector})
            return SaveResult(entry, reinforced=False)

    def _embed(self, texts: Sequence[str]) -> dict[str, list[float]]:
        """Vectors for texts when embedding happens on save; {} otherwise or on failure."""
        if self.embedder is None or not self.embed_on_save or not texts:
            return {}
        try:
            return dict(zip(texts, self.embedder.embed(list(texts)), strict=True))
        except EmbedderError as exc:
            logger.warning("embedding failed (%s); the vector will be backfilled", exc)
            return {}

    def backfill(self, batch: int = 64) -> int:
        """Embed up to `batch` live entries that have no vector from the current embedder.
        Returns how many got one; 0 when nothing is missing or the embedder is unavailable."""
        if self.embedder is None:
            return 0
        self._fresh()
        with self._mutex:
            missing = [e for e in self._entries.values() if e.live and e.id not in self._vectors]
        missing = missing[:batch]
        if not missing:
            return 0
        try:
            vectors = self.embedder.embed([e.content for e in missing])
        except EmbedderError as exc:
            logger.warning("backfill paused: %s", exc)
            return 0
        found = {e.id: v for e, v in zip(missing, vectors, strict=True)}
        with self._writing():
            found = {i: v for i, v in found.items() if i in self._entries}
            self._table.set_vectors(found, self.embedder.name)
            self._vectors.put(found)
            self._touched.update(found)
        return len(found)

    def missing_vectors(self) -> int:
        self._fresh()
        with self._mutex:
            return sum(1 for e in self._entries.values() if e.live and e.id not in self._vectors)

    def _remember(self, entries: Iterable[MemoryEntry]) -> None:
        """Take entries into the cache; the vector mirror holds live entries only."""
        entries = list(entries)
        revived = []
        for e in entries:
            self._touched.add(e.id)
            old = self._entries.get(e.id)
            if not e.live:
                self._vectors.drop([e.id])
            elif old is not None and not old.live:
                revived.append(e.id)
        if revived and self.embedder is not None:
            self._vectors.put(self._table.vectors(self.embedder.name, revived))
        for e in entries:
            old = self._entries.get(e.id)
            if old is not None:
                self._dups.pop(_dup_key(old.category, old.content), None)
            self._entries[e.id] = e
            if e.live:
                self._dups[_dup_key(e.category, e.content)] = e.id

    def _forget(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        self._vectors.drop(ids)
        for i in ids:
            self._touched.add(i)
            old = self._entries.pop(i, None)
            if old is not None and self._dups.get(_dup_key(old.category, old.content)) == i:
                del self._dups[_dup_key(old.category, old.content)]

    def delete(self, entry_id: str) -> MemoryEntry:
        with self._writing():
            entry = self._entries.get(entry_id)
            if entry is None:
                raise NotFound(
                    f"No memory entry found with id '{entry_id}'. "
                    "Use search_memory to find the correct ID."
                )
            self._table.delete([entry_id])
            self._write_index([], removed=[entry_id])
            self._forget([entry_id])
            return entry

    def apply(self, upserts: Sequence[MemoryEntry] = (), deletes: Sequence[str] = ()) -> None:
        """Write whole entries (new or changed, live or archived) and hard-delete ids, in one
        locked step. This is how the dream worker changes the store."""
        with self._mutex:
            fresh = [e for e in upserts if e.id not in self._entries and e.live]
        vectors = self._embed([e.content for e in fresh])
        with self._writing():
            new = [e for e in upserts if e.id not in self._entries]
            changed = [e for e in upserts if e.id in self._entries]
            if new:
                model = self.embedder.name if self.embedder else None
                self._table.add(new, [vectors.get(e.content) for e in new], model)
                self._vectors.put({e.id: vectors[e.content] for e in new if e.content in vectors})
            self._table.update(changed)
            self._table.delete(list(deletes))
            self._write_index(upserts, removed=deletes)
            self._forget(deletes)
            self._remember(upserts)

    def maintain(self, keep_versions_for: timedelta = timedelta(days=7)) -> None:
        """Compact LanceDB fragments, drop old versions and rebuild the index, so a long-lived
        store stays fast. Runs under the write lock like any write."""
        with self._writing():
            self._table.optimize(keep_versions_for)
            self._rebuild_index()

    def version(self) -> int:
        """The LanceDB table version: changes with every write by any process."""
        return self._table.version

    # ---- reads ----------------------------------------------------------------------------
    def get(self, entry_id: str) -> MemoryEntry | None:
        self._fresh()
        return self._entries.get(entry_id)

    def entries(self, include_archived: bool = False) -> list[MemoryEntry]:
        self._fresh()
        return [e for e in self._entries.values() if include_archived or e.live]

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
        self._fresh()
        if not text:
            with self._mutex:
                return self._recent(category, tag_list, limit)
        query_vector = self._query_vector(text) if self.keyword_weight < 1 else None
        with self._mutex:
            bm25 = []
            if self.keyword_weight > 0:
                bm25 = self._index.search(text, _CANDIDATES, category, tag_list)
            entries = dict(self._entries)
            cosine = []
            if query_vector is not None:
                filtered = category is not None or bool(tag_list)
                cosine = self._vectors.search(
                    query_vector,
                    _CANDIDATES,
                    (lambda i: matches(entries[i], category, tag_list)) if filtered else None,
                )
        importance = {i: entries[i].importance for i, _ in [*bm25, *cosine] if i in entries}
        ranked = rank_hits(bm25, cosine, importance, self.min_similarity, self.keyword_weight)
        return [Hit(entries[i], s) for i, s in ranked[:limit] if i in entries]

    def _query_vector(self, text: str) -> list[float] | None:
        if self.embedder is None or len(self._vectors) == 0:
            return None
        try:
            return self.embedder.embed([text])[0]
        except EmbedderError as exc:
            logger.warning("query embedding failed (%s); keyword search only", exc)
            return None

    def _recent(self, category: str | None, tags: Sequence[str], limit: int) -> list[Hit]:
        chosen = sorted(
            (e for e in self._entries.values() if matches(e, category, tags)),
            key=lambda e: (e.last_seen_at, e.created_at),
            reverse=True,
        )
        return [Hit(e, 0.0) for e in chosen[:limit]]

    def categories(self) -> list[tuple[str, int]]:
        self._fresh()
        counts: dict[str, int] = {}
        for e in self._entries.values():
            if e.live and e.category:
                counts[e.category] = counts.get(e.category, 0) + 1
        return sorted(counts.items(), key=lambda kv: (kv[0].casefold(), kv[0]))

"""Long-term memory: LanceDB records, a derived Tantivy index, safe across processes.

Every write happens under the data directory's write lock and ends by bumping a generation
number in `longterm.state` together with the LanceDB version it produced. Readers compare
generations (one small file read) and reload when another process wrote. A writer that finds
the LanceDB version out of step with the state (a process died mid-write) rebuilds the index.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from filelock import FileLock, Timeout

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
from dreamwell.stores.ranking import rank_hits
from dreamwell.stores.table import MemoryTable
from dreamwell.stores.text_index import IndexDoc, TextIndex

logger = logging.getLogger(__name__)

DEFAULT_DIM = 384
_CANDIDATES = 100
_JOURNAL = 256
_JOURNAL_IDS = 1000


@dataclass(frozen=True)
class _State:
    """longterm.state: the last writer's generation, the LanceDB version it left, and which
    ids each recent generation changed (None: too many to list)."""

    generation: int
    version: int
    journal: dict[int, list[str] | None]


@dataclass(frozen=True)
class SaveResult:
    entry: MemoryEntry
    reinforced: bool


@dataclass(frozen=True)
class Hit:
    entry: MemoryEntry
    score: float


def write_atomic(path: Path, text: str) -> None:
    """temp file + fsync + rename: readers see the old or the new file, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _dup_key(category: str | None, content: str) -> tuple[str, str]:
    return (category or "", fold_text(content) or content)


class LongTermStore:
    def __init__(self, data_dir: Path, *, dim: int = DEFAULT_DIM, lock_timeout: float = 15.0):
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        self._mutex = threading.RLock()
        self._flock = FileLock(str(data_dir / "write.lock"), timeout=lock_timeout)
        self._state_path = data_dir / "longterm.state"
        self._table = MemoryTable(data_dir / "lancedb", dim)
        self._index = TextIndex(data_dir / "index")
        self._entries: dict[str, MemoryEntry] = {}
        self._dups: dict[tuple[str, str], str] = {}
        self._generation = -1
        self._touched: set[str] = set()
        with self._writing(check_index=True):
            pass

    # ---- coordination -------------------------------------------------------------------
    def _read_state(self) -> _State:
        try:
            data = json.loads(self._state_path.read_text(encoding="utf-8"))
            journal = {int(g): (None if ids is None else [str(i) for i in ids])
                       for g, ids in data.get("journal", [])}
            return _State(int(data["generation"]), int(data["version"]), journal)
        except (OSError, ValueError, KeyError, TypeError):
            return _State(-1, -1, {})

    def _write_state(self, old: _State, generation: int) -> None:
        touched = sorted(self._touched) if len(self._touched) <= _JOURNAL_IDS else None
        journal = [[g, ids] for g, ids in sorted(old.journal.items()) if g > generation - _JOURNAL]
        journal.append([generation, touched])
        state = {"generation": generation, "version": self._table.version, "journal": journal}
        write_atomic(self._state_path, json.dumps(state))
        self._generation = generation

    def _catch_up(self, state: _State) -> None:
        """Load what other processes changed: just the journalled ids when the journal covers
        every generation since ours, else everything."""
        wanted = range(self._generation + 1, state.generation + 1)
        ids: set[str] = set()
        for g in wanted:
            changed = state.journal.get(g)
            if changed is None or self._generation < 0:
                self._load_entries()
                break
            ids.update(changed)
        else:
            found = {e.id: e for e in self._table.get(sorted(ids))}
            self._forget(ids - found.keys())
            self._remember(found.values())
        self._index.reload()

    def _load_entries(self) -> None:
        self._entries = {e.id: e for e in self._table.entries()}
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
                state = self._read_state()
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
                self._write_state(state, generation)
            finally:
                self._flock.release()

    def _fresh(self) -> None:
        """Pick up what other processes wrote (cheap when nothing changed)."""
        state = self._read_state()
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
            self._table.add([entry])
            self._write_index([entry])
            self._remember([entry])
            return SaveResult(entry, reinforced=False)

    def _remember(self, entries: Iterable[MemoryEntry]) -> None:
        for e in entries:
            self._touched.add(e.id)
            old = self._entries.get(e.id)
            if old is not None:
                self._dups.pop(_dup_key(old.category, old.content), None)
            self._entries[e.id] = e
            if e.live:
                self._dups[_dup_key(e.category, e.content)] = e.id

    def _forget(self, ids: Iterable[str]) -> None:
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
        with self._writing():
            new = [e for e in upserts if e.id not in self._entries]
            changed = [e for e in upserts if e.id in self._entries]
            if new:
                self._table.add(new)
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
        with self._mutex:
            if not text:
                return self._recent(category, tag_list, limit)
            bm25 = self._index.search(text, _CANDIDATES, category, tag_list)
            entries = dict(self._entries)
        ranked = rank_hits(bm25, [], {i: entries[i].importance for i, _ in bm25 if i in entries})
        return [Hit(entries[i], s) for i, s in ranked[:limit] if i in entries]

    def _recent(self, category: str | None, tags: Sequence[str], limit: int) -> list[Hit]:
        def matches(e: MemoryEntry) -> bool:
            if not e.live or not all(t in e.tags for t in tags):
                return False
            cat = e.category or ""
            return category is None or cat == category or cat.startswith(category + "/")

        chosen = sorted(
            (e for e in self._entries.values() if matches(e)),
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

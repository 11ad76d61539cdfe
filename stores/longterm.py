"""Long-term memory: a write-ahead log in front of LanceDB records and a Tantivy index.

Writes: a save, delete or batch takes `write.lock`, reads the log to its end, decides (the
duplicate check, compare-and-set of background writers), appends one record per commit with
one fsync, and replies. Saves that arrive together share that fsync (group commit). Nothing
else is on the reply path: vectors are computed afterwards and logged as their own records,
and a checkpoint folds the log into LanceDB (one upsert) and Tantivy (one commit) in batches,
under `checkpoint.lock`, without holding up saves.

Reads never take a file lock: every process tails the log, applies new records to an
immutable `View` that it swaps in, and searches Tantivy plus the records not yet
checkpointed (scored with the index's own statistics). A log segment deleted before a slow
process read it is made good from LanceDB through the state file's journal.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar

import numpy as np
from filelock import FileLock, Timeout

from dreamwell.stores.embedding import Embedder, EmbedderError, Reranker
from dreamwell.stores.errors import NotFound, StoreBusy, StoreError
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import (
    CONTEXT_SECONDS,
    FOLLOWS,
    MAX_TAGS,
    MemoryEntry,
    Vector,
    check_category,
    check_content,
    check_query,
    check_tags,
    entry_from_dict,
    entry_to_dict,
    fold_text,
    new_id,
    text_hash,
    utcnow,
)
from dreamwell.stores.ranking import CONTEXT_WEIGHT, KEYWORD_WEIGHT, rank_hits
from dreamwell.stores.state import StateFile, write_atomic
from dreamwell.stores.table import MemoryTable, StoredVector
from dreamwell.stores.text_index import DocTerms, IndexDoc, TextIndex
from dreamwell.stores.view import Rows, View, from_bf16
from dreamwell.stores.wal import Op, Record, Wal, WalGap

logger = logging.getLogger(__name__)

T = TypeVar("T")
_CANDIDATES = 100
SEARCH_EMBEDS = 512  # a search embeds at most this many entries the backfill has not reached
CHECKPOINT_RECORDS = 512  # fold the log into LanceDB/Tantivy when this many ids are pending
CHECKPOINT_SECONDS = 5.0  # ... or when the oldest pending change is this old
COMPACT_FRAGMENTS = 16  # compact LanceDB when it has this many fragments
KEEP_VERSIONS = timedelta(seconds=30)  # old LanceDB versions kept for readers mid-scan
ROWS_SLACK = 4096  # rows of deleted entries a process keeps beyond one per entry (see checkpoint)


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()  # Write.expect: write whatever the entry is now


@dataclass(frozen=True)
class SaveResult:
    entry: MemoryEntry
    reinforced: bool


@dataclass(frozen=True)
class Hit:
    entry: MemoryEntry
    score: float


@dataclass(frozen=True)
class Write:
    """Set entry `id` to `new` (None: delete it for good) if it still equals `expect`
    (None: it must not exist; ANY: whatever it is)."""

    id: str
    expect: MemoryEntry | _Any | None
    new: MemoryEntry | None


def matches(e: MemoryEntry, category: str | None, tags: Sequence[str]) -> bool:
    """Live, under the category prefix (segment boundary) and carrying every tag."""
    if not e.live or not all(t in e.tags for t in tags):
        return False
    cat = e.category or ""
    return category is None or cat == category or cat.startswith(category + "/")


def _dup_key(category: str | None, content: str) -> int:
    """A 64-bit digest of the category and the folded text: one small int per live memory in
    the duplicate map (a (category, 128-bit digest) tuple took 105 bytes). A hit is only a
    candidate: `_same_text` confirms it, so a collision can never merge two memories."""
    text = f"{category or ''}\0{fold_text(content) or content}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _same_text(entry: MemoryEntry, category: str | None, content: str) -> bool:
    """Whether `entry` is a duplicate of this category and text (what _dup_key digests)."""
    return (entry.category or "") == (category or "") and (
        fold_text(entry.content) or entry.content
    ) == (fold_text(content) or content)


def _put(entry: MemoryEntry) -> Op:
    return {"op": "put", "e": entry_to_dict(entry)}


def _vec(entry: MemoryEntry, model: str, vector: Sequence[float]) -> Op:
    raw = np.asarray(vector, dtype=np.float32).tobytes()
    return {
        "op": "vec",
        "id": entry.id,
        "m": model,
        "h": text_hash(entry.content),
        "v": base64.b64encode(raw).decode("ascii"),
    }


def _vector_of(op: Op) -> list[float]:
    return np.frombuffer(base64.b64decode(op["v"]), dtype=np.float32).tolist()  # type: ignore[no-any-return]


class Scratch:
    """The store as a commit's plans see it: the view plus the batch's earlier changes."""

    def __init__(self, view: View, dups: Mapping[int, str]) -> None:
        self._view = view
        self._dups = dups
        self._changed: dict[str, MemoryEntry | None] = {}
        self._dup_changes: dict[int, str | None] = {}

    def get(self, entry_id: str) -> MemoryEntry | None:
        if entry_id in self._changed:
            return self._changed[entry_id]
        return self._view.get(entry_id)

    def duplicate_of(self, category: str | None, content: str) -> MemoryEntry | None:
        key = _dup_key(category, content)
        found = self._dup_changes[key] if key in self._dup_changes else self._dups.get(key)
        entry = self.get(found) if found else None
        if entry is None or not entry.live or not _same_text(entry, category, content):
            return None
        return entry

    def take(self, ops: Sequence[Op]) -> None:
        for op in ops:
            if op["op"] == "put":
                entry = entry_from_dict(op["e"])
                self._forget(entry.id)
                self._changed[entry.id] = entry
                if entry.live:
                    self._dup_changes[_dup_key(entry.category, entry.content)] = entry.id
            elif op["op"] == "del":
                self._forget(op["id"])
                self._changed[op["id"]] = None

    def _forget(self, entry_id: str) -> None:
        old = self.get(entry_id)
        if old is not None and old.live:
            self._dup_changes[_dup_key(old.category, old.content)] = None


@dataclass
class _Request:
    plan: Callable[[Scratch], tuple[list[Op], Any]]
    done: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)  # done, or now leads
    lead: bool = False
    result: Any = None
    error: BaseException | None = None


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
        self._last_save: dict[str, tuple[str, datetime, str | None]] = {}  # caller -> id, at, cat
        self._flock = FileLock(str(self.dirs.write_lock), timeout=lock_timeout)
        self._cplock = FileLock(str(self.dirs.checkpoint_lock), timeout=lock_timeout)
        self._state = StateFile(self.dirs.state)
        self._table = MemoryTable(self.dirs.lancedb)
        self._index = TextIndex(self.dirs.index)
        self._wal = Wal(self.dirs.wal)
        self._apply_lock = threading.RLock()  # in-memory changes only, never held during I/O
        self._queue_lock = threading.Lock()
        self._queue: list[_Request] = []
        self._leading = False
        self._view = View()
        self._pending: Mapping[str, tuple[int, float]] = MappingProxyType({})  # id -> seq, time
        self._terms: dict[str, DocTerms] = {}
        self._rows = Rows()
        self._unlogged: set[str] = set()  # vectors a search computed, not yet in the log
        self._dups: dict[int, str] = {}
        self._generation = -1  # the last checkpoint whose changes this process has applied
        self._indexed = 0  # the checkpoint the Tantivy searcher reflects
        self._wal_dir_stamp = 0
        self._vectors_ready = embedder is None
        # set by a change or a load that leaves entries without a vector; `backfill()` clears
        # it as it looks, so after a failed embed entries can still be missing while it is
        # clear (`missing_vectors()` counts them)
        self.vectors_wanted = threading.Event()
        self._on_vectors_wanted = on_vectors_wanted
        self._loaded_live = 0
        self._load()
        self._check_table()
        self._repair_index()

    # ---- loading and catching up --------------------------------------------------------------
    def _load(self) -> None:
        """Entries from LanceDB at a checkpoint, then the log after it."""
        for _ in range(20):
            state = self._state.read()
            entries = self._table.entries()
            if self._state.read().generation != state.generation:
                continue  # a checkpoint finished meanwhile: read again
            start = state.checkpoint if state.known else self._first_logged() - 1
            self._wal.start_at(start)
            try:
                records = self._wal.read_new()
            except WalGap:
                continue
            break
        else:
            raise StoreBusy("the memory store kept changing while it was opened; try again.")
        with self._apply_lock:
            self._loaded_live = sum(1 for e in entries if e.live)
            self._view = View.of(entries)
            self._rows = Rows(max(1024, len(entries) + 1024))
            self._dups = {}
            self._pending = MappingProxyType({})
            self._terms = {}
            for e in entries:
                self._rows.put(e)
                if e.live:
                    self._dups[_dup_key(e.category, e.content)] = e.id
            self._generation = state.generation if state.known else -1
            self._indexed = start
            self._index.reload()
            self._apply(records)
            if self.embedder is not None:
                self._vectors_ready = False

    def _first_logged(self) -> int:
        segments = self._wal.segments()
        return segments[0] if segments else 1

    @property
    def vectors_loaded(self) -> bool:
        """Whether this embedder's stored vectors are in memory (always, without one)."""
        return self._vectors_ready

    def load_vectors(self) -> None:
        """Read this embedder's vectors from LanceDB into memory (after start-up: searches
        meanwhile are keyword-only). Vectors of edited text are left out and re-embedded."""
        if self.embedder is None or self._vectors_ready:
            return
        stored = self._table.vectors(self.embedder.name)
        with self._apply_lock:
            self._adopt(stored)
            self._vectors_ready = True
        if self.missing_vectors():
            self._want_vectors()

    def _want_vectors(self) -> None:
        if not self.vectors_wanted.is_set():  # the hook only on a change: not on every save
            self.vectors_wanted.set()
            if self._on_vectors_wanted is not None:
                self._on_vectors_wanted()

    def _fresh(self) -> None:
        """Pick up what any process wrote: a few stat() calls when nothing changed."""
        if self._state.unchanged() and not self._wal_moved():
            return
        self._catch_up()

    def _wal_moved(self) -> bool:
        try:
            stamp = self.dirs.wal.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = 0
        moved = stamp != self._wal_dir_stamp
        self._wal_dir_stamp = stamp
        return moved or self._wal.has_unread()

    def _catch_up(self) -> None:
        with self._apply_lock:
            state = self._state.read()
            if state.known and state.checkpoint > self._indexed and not self._index.in_ram:
                self._index.reload()
                self._indexed = state.checkpoint
                self._pending = MappingProxyType(
                    {i: p for i, p in self._pending.items() if p[0] > state.checkpoint}
                )
                # the terms of checkpointed entries are in the index now: drop them, or this
                # cache would hold every entry ever searched while pending
                self._terms = {i: t for i, t in self._terms.items() if i in self._pending}
            try:
                records = self._wal.read_new()
            except WalGap as gap:
                logger.info("catching up from LanceDB: %s", gap)
                self._recover(state)
                return
            self._apply(records)
            if state.known and self._wal.last_seq >= state.checkpoint:
                self._generation = state.generation

    def _recover(self, state: Any) -> None:
        """Some log records were checkpointed and deleted before this process read them:
        reload the ids the journal says those checkpoints wrote (or everything)."""
        ids = state.changed_since(self._generation) if state.known else None
        if ids is None:
            self._load()
            return
        found = {e.id: e for e in self._table.get(sorted(ids))}
        changes: dict[str, MemoryEntry | None] = {i: found.get(i) for i in ids}
        self._wal.start_at(state.checkpoint)
        self._change(changes, seq=0)
        if self.embedder is not None and found:
            self._adopt(self._table.vectors(self.embedder.name, sorted(found)))
        self._generation = state.generation
        self._catch_up()

    def _adopt(self, stored: Mapping[str, StoredVector]) -> None:
        """Take stored vectors into memory (caller holds the apply lock), except for entries
        that already have one or whose text changed since the vector was made."""
        assert self.embedder is not None
        for entry_id, vector in stored.items():
            entry = self._view.get(entry_id)
            if entry is None or self._rows.has_vector(entry_id):
                continue
            if text_hash(entry.content) == vector.text_hash:
                self._rows.set_vector(entry_id, self.embedder.name, vector.values)

    def _apply(self, records: Sequence[Record]) -> None:
        """Apply log records to the in-memory view (caller holds the apply lock)."""
        for record in records:
            changes: dict[str, MemoryEntry | None] = {}
            vectors: list[Op] = []
            for op in record.ops:
                if op["op"] == "put":
                    entry = entry_from_dict(op["e"])
                    changes[entry.id] = entry
                elif op["op"] == "del":
                    changes[str(op["id"])] = None
                elif op["op"] == "vec":
                    vectors.append(op)
            if changes:
                self._change(changes, record.seq)
            model = self.embedder.name if self.embedder is not None else None
            for op in vectors:  # another embedder's vectors are not this process's business
                target = self._view.get(str(op["id"]))
                if (
                    op["m"] == model
                    and target is not None
                    and target.live
                    and text_hash(target.content) == op["h"]
                ):
                    self._rows.set_vector(target.id, str(op["m"]), _vector_of(op))
                    self._unlogged.discard(target.id)

    def _change(self, changes: Mapping[str, MemoryEntry | None], seq: int) -> None:
        view = self._view
        now = time.monotonic()
        pending = dict(self._pending)
        for entry_id, new in changes.items():
            old = view.get(entry_id)
            if old is not None and old.live:
                key = _dup_key(old.category, old.content)
                if self._dups.get(key) == entry_id:
                    del self._dups[key]
            if new is None or not new.live or (old is not None and old.content != new.content):
                self._unlogged.discard(entry_id)
            if new is None:
                self._rows.remove(entry_id)
            else:
                self._rows.put(new)
                if new.live:
                    self._dups[_dup_key(new.category, new.content)] = entry_id
                if not new.live or (old is not None and old.content != new.content):
                    self._rows.drop_vector(entry_id)
            if seq > 0:
                pending[entry_id] = (seq, pending.get(entry_id, (0, now))[1])
                self._terms.pop(entry_id, None)
        if seq > 0 and self._rows.linked:  # their contextual field changed too
            for entry_id in changes:
                for other in self._rows.neighbours(entry_id):
                    if other not in changes and view.get(other) is not None:
                        pending[other] = (seq, pending.get(other, (0, now))[1])
                        self._terms.pop(other, None)
        self._view = view.with_changes(changes)
        self._pending = MappingProxyType(pending)
        if self.embedder is not None and any(n is not None and n.live for n in changes.values()):
            self._want_vectors()

    def _check_table(self) -> None:
        """Make good what LanceDB lost: a fragment that cannot be read (a data file missing or
        damaged) or versions newer than its manifest says (the newest manifest deleted, so
        LanceDB silently serves an older table). The log segments still on disk are folded in
        again, unreadable fragments are removed from the table (their files kept under
        `damaged/`), and what could not be restored is named in the log and in a report."""
        state = self._state.read()
        rolled_back = state.known and self._table.version < state.version
        if not self._table.damaged and not rolled_back:
            return
        try:
            self._cplock.acquire(timeout=self._flock.timeout)
        except (Timeout, OSError) as exc:
            logger.error("long-term memory is damaged and cannot be repaired now (%s)", exc)
            return
        try:
            self._restore(self._state.read())
        except (RuntimeError, OSError) as exc:
            logger.error(
                "long-term memory in %s is damaged and could not be repaired (%s); serving "
                "what can be read. Restore the data directory from a backup or run "
                "`dreamwell export` to save what is left.",
                self.data_dir,
                exc,
            )
            return
        finally:
            self._cplock.release()
        self._load()

    def _restore(self, state: Any) -> None:
        found = self._table.version
        stale = state.written_after(found) if state.known and found < state.version else set()
        rows_lost = sum(d.rows for d in self._table.damaged.values())
        fragments = sorted(self._table.damaged)
        kept = self._table.isolate(self.dirs.damaged) if fragments else []
        missing = self._index.ids() - {e.id for e in self._table.entries()}
        needed = missing | (stale or set())
        through = state.checkpoint if state.known else self._wal.last_seq
        retained = self._fold(0, through)  # idempotent: the log still holds these records
        restored = sorted(needed & retained)
        lost = sorted(needed - retained)
        if lost:
            with self._index.writing() as writer:
                for entry_id in lost:
                    writer.delete(entry_id)
        self._state.write(state, through, self._table.version, retained | set(lost))
        report = {
            "at": utcnow().isoformat(),
            "lancedb_version_found": found,
            "lancedb_version_expected": state.version if state.known else None,
            "unreadable_fragments": fragments,
            "rows_in_them": rows_lost,
            "files_kept": [str(p) for p in kept],
            "restored_from_log": restored,
            "lost": lost,
            "journal_incomplete": stale is None,
        }
        self.dirs.damaged.mkdir(parents=True, exist_ok=True)
        path = self.dirs.damaged / f"longterm-{utcnow():%Y%m%dT%H%M%S%fZ}.json"
        write_atomic(path, json.dumps(report, indent=1))
        what = (
            f"{len(fragments)} unreadable LanceDB fragment(s) ({rows_lost} rows)"
            if fragments
            else f"LanceDB at version {found}, older than the {state.version} last written "
            "(its newest manifest is missing)"
        )
        logger.error(
            "long-term memory in %s was damaged: %s. %d memories were restored from the "
            "write-ahead log; %d could not be and are lost%s. Details: %s",
            self.data_dir,
            what,
            len(restored),
            len(lost),
            f" ({', '.join(lost[:10])}{', ...' if len(lost) > 10 else ''})" if lost else "",
            path,
        )

    def _repair_index(self) -> None:
        """Rebuild the Tantivy index from LanceDB when it is missing, damaged or out of step
        with the checkpoint (checked again under the checkpoint lock; skipped while one runs)."""
        if self._index.in_step(self._loaded_live):
            return
        if self._index.in_ram:  # a read-only directory: index what was loaded, in memory
            self._index.rebuild(self._doc(e) for e in self._view.values() if e.live)
            self._indexed = self._wal.last_seq
            self._pending = MappingProxyType({})
            return
        try:
            self._cplock.acquire(timeout=0)
        except (Timeout, OSError):
            return
        try:
            state = self._state.read()
            entries = self._table.entries()
            live = [e for e in entries if e.live]
            if self._index.in_step(len(live)):
                return
            logger.warning(
                "the text index is out of step; rebuilding it from %d records", len(live)
            )
            self._index.rebuild(self._doc(e) for e in live)
            checkpoint = state.checkpoint if state.known else self._indexed
            with self._locked():
                self._state.write(self._state.read(), checkpoint, self._table.version, set())
        except OSError as exc:  # a read-only directory: search what there is
            logger.warning("cannot repair the text index: %s", exc)
        finally:
            self._cplock.release()
        self._catch_up()

    # ---- writing --------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._flock.acquire()
        except Timeout as exc:
            raise StoreBusy(
                "the memory store is locked by another process; try again in a moment."
            ) from exc
        except OSError as exc:
            raise StoreError(
                f"cannot lock the data directory {self.data_dir} ({exc.strerror}); it may be "
                "read-only. Reads still work; give a writable --data-dir to save."
            ) from exc
        try:
            yield
        finally:
            self._flock.release()

    def _commit(self, plan: Callable[[Scratch], tuple[list[Op], T]]) -> T:
        """Run `plan` under the write lock and log its operations; plans that arrive while
        another commit is being written share the next write and fsync (group commit)."""
        request = _Request(plan)
        with self._queue_lock:
            self._queue.append(request)
            request.lead = not self._leading
            self._leading = True
        while not request.done.is_set():
            if request.lead:
                self._lead()
            else:
                request.wake.wait()
                request.wake.clear()
        if request.error is not None:
            raise request.error
        return request.result  # type: ignore[no-any-return]

    def _lead(self) -> None:
        for _ in range(8):  # then hand over, so one caller does not serve everyone forever
            with self._queue_lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._leading = False
                    return
            self._write_batch(batch)
        with self._queue_lock:
            if self._queue:
                self._queue[0].lead = True
                self._queue[0].wake.set()
            else:
                self._leading = False

    def _write_batch(self, batch: list[_Request]) -> None:
        try:
            with self._locked():
                self._catch_up()
                scratch = Scratch(self._view, self._dups)
                logged: list[list[Op]] = []
                written: list[_Request] = []
                for request in batch:
                    try:
                        ops, request.result = request.plan(scratch)
                    except Exception as exc:  # the plan's own error goes to its caller
                        request.error = exc
                        continue
                    if ops:
                        scratch.take(ops)
                        logged.append(ops)
                        written.append(request)
                if logged:
                    try:
                        self._wal.append(logged)
                    except OSError as exc:
                        error = StoreError(
                            f"could not write to {self.data_dir} ({exc.strerror or exc}); "
                            "nothing was saved. Free disk space or fix permissions, then retry."
                        )
                        for request in written:
                            request.error = error
                self._catch_up()
        except Exception as exc:  # StoreBusy, a read-only directory, ...: every caller hears it
            for request in batch:
                if request.error is None:
                    request.error = exc
        finally:
            for request in batch:
                request.done.set()
                request.wake.set()

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
        content = check_content(content)
        category = check_category(category)
        tag_list = check_tags(tags)
        now = now or utcnow()
        self._fresh()
        known = self._dups.get(_dup_key(category, content))
        vector = self._embed_one(content) if known is None else None

        def plan(s: Scratch) -> tuple[list[Op], SaveResult]:
            old = s.duplicate_of(category, content)
            if old is not None:
                entry = replace(
                    old,
                    tags=tuple(dict.fromkeys(old.tags + tag_list))[:MAX_TAGS],
                    last_seen_at=max(now, old.last_seen_at),
                    updated_at=now,
                    reinforcement_count=old.reinforcement_count + 1,
                )
                self._remember(caller, entry, now)
                return [_put(entry)], SaveResult(entry, reinforced=True)
            meta = dict(metadata or {})
            follows = self._follows(s, caller, category, now)
            if follows is not None:
                meta[FOLLOWS] = follows
            entry = MemoryEntry(new_id(), content, category, tag_list, now, now, now, metadata=meta)
            self._remember(caller, entry, now)
            ops = [_put(entry)]
            if vector is not None and self.embedder is not None:
                ops.append(_vec(entry, self.embedder.name, vector))
            return ops, SaveResult(entry, reinforced=False)

        return self._commit(plan)

    def _follows(
        self, s: Scratch, caller: str | None, category: str | None, now: datetime
    ) -> str | None:
        """The caller's previous memory, if this one continues it (the gate of contextual
        memories: same caller, same category, within CONTEXT_SECONDS, still live)."""
        if not self.contextual or caller is None or caller not in self._last_save:
            return None
        last_id, at, last_category = self._last_save[caller]
        if last_category != category or not 0 <= (now - at).total_seconds() <= CONTEXT_SECONDS:
            return None
        last = s.get(last_id)
        return last_id if last is not None and last.live else None

    def _remember(self, caller: str | None, entry: MemoryEntry, now: datetime) -> None:
        if caller is not None and self.contextual:
            if len(self._last_save) >= 10_000:  # callers come and go: keep the map bounded
                self._last_save.clear()
            self._last_save[caller] = (entry.id, now, entry.category)

    def _embed_one(self, text: str) -> list[float] | None:
        if self.embedder is None or not self.embed_on_save:
            return None
        try:
            return self.embedder.embed([text])[0]
        except EmbedderError as exc:
            logger.warning("embedding failed (%s); the vector will be backfilled", exc)
            return None

    def delete(self, entry_id: str) -> MemoryEntry:
        def plan(s: Scratch) -> tuple[list[Op], MemoryEntry]:
            entry = s.get(entry_id)
            if entry is None:
                raise NotFound(
                    f"No memory entry found with id '{entry_id}'. "
                    "Use search_memory to find the correct ID."
                )
            return [{"op": "del", "id": entry_id}], entry

        return self._commit(plan)

    def write(self, groups: Sequence[Sequence[Write]]) -> list[bool]:
        """Compare-and-set: each group is written whole if every entry in it still equals its
        `expect`, else not at all. One log record per group, one fsync for all. Returns, per
        group, whether it was written. Background writers (the dream, undo, import) use this
        so they never overwrite, or bring back, what a user changed meanwhile."""

        def plan(s: Scratch) -> tuple[list[Op], list[bool]]:
            ops: list[Op] = []
            done: list[bool] = []
            for group in groups:
                if all(w.expect is ANY or s.get(w.id) == w.expect for w in group):
                    group_ops: list[Op] = [
                        _put(w.new) if w.new is not None else {"op": "del", "id": w.id}
                        for w in group
                    ]
                    s.take(group_ops)
                    ops += group_ops
                    done.append(True)
                else:
                    done.append(False)
            return ops, done

        return self._commit(plan)

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
        self._fresh()
        view = self._view
        missing: list[MemoryEntry] = []
        for entry_id in list(self._unlogged):  # embedded by a search, not logged yet
            entry = view.get(entry_id)
            if entry is not None and entry.live and len(missing) < batch:
                missing.append(entry)
        for entry_id in self._rows.without_vector(batch - len(missing)):
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
            ops = [
                _vec(e, model, v)
                for e, v in zip(missing, vectors, strict=True)
                if (now := s.get(e.id)) is not None and now.live and now.content == e.content
            ]
            return ops, len(ops)

        return self._commit(plan)

    def vectors(self, model: str) -> dict[str, Vector]:
        """Every entry's vector made by `model`: the current embedder's as held in memory
        (pending ones included), another model's as stored in LanceDB. Rows of one copied
        matrix, so the caller may keep them while the store goes on changing."""
        if self.embedder is not None and model == self.embedder.name:
            self.load_vectors()
            self._fresh()
            with self._apply_lock:
                rows = self._rows
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
        self._fresh()
        return self._view.live_count - self._rows.vector_count() + len(self._unlogged)

    # ---- checkpoints ----------------------------------------------------------------------------
    def checkpoint_due(self, max_age: float = CHECKPOINT_SECONDS) -> bool:
        """Enough changes are pending, or the oldest has waited `max_age` seconds."""
        self._fresh()
        pending = self._pending
        if not pending:
            return False
        if len(pending) >= CHECKPOINT_RECORDS:
            return True
        oldest = min(p[1] for p in pending.values())
        return time.monotonic() - oldest >= max_age

    def checkpoint(self, wait: bool = True) -> bool:
        """Fold the log into LanceDB and Tantivy and drop the folded segments. Returns False
        when another process is doing it (with wait=False) or there was nothing to fold."""
        self._compact_rows()
        try:
            self._cplock.acquire(timeout=None if wait else 0)
        except Timeout:
            return False
        except OSError as exc:
            raise StoreError(f"cannot checkpoint {self.data_dir}: {exc.strerror}") from exc
        try:
            began = time.perf_counter()
            self._check_table()
            with self._locked():  # seal: new writes go to a new segment
                self._catch_up()
                state = self._state.read()
                start = state.checkpoint if state.known else self._first_logged() - 1
                end = self._wal.last_seq
                if end <= start:
                    return False
                self._wal.rotate()
            sealed = time.perf_counter()
            touched = self._fold(start, end)
            folded = time.perf_counter()
            with self._locked():
                self._state.write(self._state.read(), end, self._table.version, touched)
                self._wal.drop_sealed(end)
            recorded = time.perf_counter()
            if self._table.fragments() >= COMPACT_FRAGMENTS:
                self._table.optimize(KEEP_VERSIONS)
            logger.debug(
                "checkpoint of %d changes: %.0f ms (seal %.0f, fold %.0f, compaction %.0f)",
                len(touched),
                1000 * (time.perf_counter() - began),
                1000 * (sealed - began),
                1000 * (folded - sealed),
                1000 * (time.perf_counter() - recorded),
            )
        finally:
            self._cplock.release()
        self._catch_up()
        return True

    def _compact_rows(self) -> None:
        """Rebuild this process's rows without those of deleted entries once they outnumber
        the entries by ROWS_SLACK: each row holds a vector, and a server that saves and
        deletes for months would otherwise keep one for every memory it ever saw. Readers
        keep the rows they took; the rebuild takes about a second per 100,000 entries, off
        the tool calls' path (checkpoints run in the background)."""
        with self._apply_lock:
            if self._rows.n > 2 * self._view.size + ROWS_SLACK:
                self._rows = self._rows.compacted(self._view.values())

    def _fold(self, start: int, end: int) -> set[str]:
        """Write the records start < seq <= end to LanceDB and Tantivy (idempotent: a fold
        that died half-way is simply done again)."""
        final: dict[str, MemoryEntry | None] = {}
        vectors: dict[str, Op] = {}
        for record in self._wal.sealed_records(start, end):
            for op in record.ops:
                if op["op"] == "put":
                    entry = entry_from_dict(op["e"])
                    final[entry.id] = entry
                    if (v := vectors.get(entry.id)) is not None and v["h"] != text_hash(
                        entry.content
                    ):
                        del vectors[entry.id]
                elif op["op"] == "del":
                    final[str(op["id"])] = None
                    vectors.pop(str(op["id"]), None)
                elif op["op"] == "vec":
                    vectors[str(op["id"])] = op
        for entry_id in vectors.keys() - final.keys():
            current = self._view.get(entry_id)  # a vector for an entry checkpointed earlier
            if current is not None:
                final[entry_id] = current
        kept = {i: e for i, e in final.items() if e is not None}
        stored = self._table.stored_vectors([i for i in kept if i not in vectors])
        rows: dict[str, tuple[MemoryEntry, StoredVector | None]] = {}
        for entry_id, entry in kept.items():
            vector: StoredVector | None = None
            logged = vectors.get(entry_id)
            if logged is not None and logged["h"] == text_hash(entry.content):
                vector = StoredVector(str(logged["m"]), _vector_of(logged), str(logged["h"]))
            elif (old := stored.get(entry_id)) is not None and old.text_hash == text_hash(
                entry.content
            ):
                vector = old
            rows[entry_id] = (entry, vector)
        deleted = [i for i, e in final.items() if e is None]
        began = time.perf_counter()
        self._table.delete(deleted)
        self._table.upsert(list(rows.values()))
        written = time.perf_counter()
        # a changed memory also changes the contextual field of its neighbours (unless their
        # own change is still to be checkpointed: that checkpoint will index them)
        docs: dict[str, MemoryEntry | None] = {i: e for i, e in final.items()}
        pending = self._pending
        for entry_id in final:
            for other in self._rows.neighbours(entry_id):
                if other not in docs and pending.get(other, (0, 0.0))[0] <= end:
                    docs[other] = self._view.get(other)
        with self._index.writing() as writer:
            for entry_id, doc_entry in docs.items():
                if doc_entry is not None and doc_entry.live:
                    writer.upsert(self._doc(doc_entry))
                else:
                    writer.delete(entry_id)
        logger.debug(
            "fold: LanceDB %.0f ms, Tantivy %.0f ms",
            1000 * (written - began),
            1000 * (time.perf_counter() - written),
        )
        return set(final)

    def _doc(self, entry: MemoryEntry) -> IndexDoc:
        """The index document of `entry`: its text, and the text of the live memories saved
        just before and after it by the same caller (the contextual field)."""
        around = [
            e.content
            for i in self._rows.neighbours(entry.id)
            if (e := self._view.get(i)) is not None and e.live
        ]
        return IndexDoc(entry.id, entry.content, entry.category, entry.tags, "\n".join(around))

    def maintain(self, keep_versions_for: timedelta = KEEP_VERSIONS) -> None:
        """Checkpoint, then compact LanceDB and drop old versions."""
        self.checkpoint()
        with self._cplock:
            self._table.optimize(keep_versions_for)

    def reindex(self) -> None:
        """Rebuild the Tantivy index from LanceDB (after a checkpoint)."""
        self.checkpoint()
        with self._cplock:
            live = [e for e in self._table.entries() if e.live]
            self._index.rebuild(self._doc(e) for e in live)
            with self._locked():
                state = self._state.read()
                self._state.write(state, state.checkpoint, self._table.version, set())
        self._catch_up()

    def version(self) -> int:
        """The LanceDB table version: changes with every checkpoint by any process."""
        return self._table.version

    def change_seq(self) -> int:
        """The number of the last change any process logged: moves with every write (a few
        stat() calls when nothing changed), so a page can poll it to know when to reload."""
        self._fresh()
        return self._wal.last_seq

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
        return len(self._pending)

    # ---- reads ----------------------------------------------------------------------------------
    def get(self, entry_id: str) -> MemoryEntry | None:
        self._fresh()
        return self._view.get(entry_id)

    def entries(self, include_archived: bool = False) -> list[MemoryEntry]:
        self._fresh()
        return [e for e in self._view.values() if include_archived or e.live]

    def count(self) -> int:
        self._fresh()
        return self._view.live_count

    def categories(self) -> list[tuple[str, int]]:
        self._fresh()
        return sorted(self._view.categories.items(), key=lambda kv: (kv[0].casefold(), kv[0]))

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
        view, rows = self._view, self._rows
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
        if self.embedder is None or not self._vectors_ready:
            return False
        if not self.wait_for_model and not getattr(self.embedder, "ready", True):
            return False  # the model is still loading: keywords now rather than a wait
        rows = self._rows
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
        with self._apply_lock:
            for entry, vector in zip(entries, vectors, strict=True):
                current = self._view.get(entry.id)
                if current is not None and current.content == entry.content:
                    self._rows.set_vector(entry.id, self.embedder.name, vector)
                    self._unlogged.add(entry.id)
        return True

    def _keyword(
        self, text: str, view: View, category: str | None, tags: Sequence[str]
    ) -> list[tuple[str, float]]:
        """BM25 over the index plus the changes not checkpointed yet (which override it)."""
        pending = self._pending
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
            terms = self._terms.get(entry_id)
            if terms is None:
                terms = self._index.doc_terms(self._doc(entry))
                self._terms[entry_id] = terms
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

"""This process's copy of long-term memory, and applying changes to it.

`Mirror` holds what reads are served from: the immutable `View` of the entries (swapped whole
by each change), their `Rows` (filters and this embedder's vectors), the duplicate map, which
ids are pending (logged but not yet checkpointed into LanceDB and Tantivy), the index terms
cached for those, and vectors a search computed that are not logged yet. It applies log
records and loaded entries to them under its lock, which is never held during I/O. Where the
records come from (the log, LanceDB) is `stores/longterm/catchup.py`'s business.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from dreamwell.stores.index.duplicate_map import DupIndex
from dreamwell.stores.index.postings import Postings
from dreamwell.stores.index.rows import Matrix, Rows
from dreamwell.stores.index.text_index import IndexDoc
from dreamwell.stores.index.view import View
from dreamwell.stores.longterm import operations as ops
from dreamwell.stores.longterm.lance_table import StoredVector
from dreamwell.stores.longterm.log import Op, Record
from dreamwell.stores.model import PROJECT, MemoryEntry, text_hash

Pending = Mapping[str, tuple[int, float]]  # id -> (seq of its last change, monotonic time)

# Seconds a memory another process saved is left to that process to embed (its vector arrives
# in the log) before this one embeds it instead, counted from when it arrived here or from the
# last vector another process logged, whichever is later: a process that saves embeds what it
# saved, so a memory is embedded once across the processes on a data directory; one that
# cannot (it has no embedder, another model, it died) is covered after this grace.
FOREIGN_GRACE = 5.0


class Mirror:
    def __init__(self, model: str | None, on_vectors_wanted: Callable[[], None] | None) -> None:
        """`model`: the embedder's name (None without one): only its vectors are kept."""
        self.model = model
        self.lock = threading.RLock()  # in-memory changes only, never held during I/O
        self.view = View()
        self.pending: Pending = MappingProxyType({})
        self.terms = Postings()  # the pending entries' analysed terms
        self.rows = Rows()
        self.unlogged: set[str] = set()  # vectors a search computed, not yet in the log
        self.dups = DupIndex()
        self.generation = -1  # the last checkpoint whose changes this process has applied
        self.indexed = 0  # the checkpoint the Tantivy searcher reflects
        self.appended = 0  # the last record this process appended itself
        self.vectors_ready = model is None
        # set by a change or a load that leaves entries without a vector; the backfill clears
        # it as it looks, so after a failed embed entries can still be missing while it is
        # clear (`Vectors.missing()` counts them)
        self.vectors_wanted = threading.Event()
        self._on_vectors_wanted = on_vectors_wanted
        self.loaded_live = 0
        self.mine: set[str] = set()  # ids this process is logging a put for right now
        self.foreign: dict[str, float] = {}  # id -> when another process's save of it arrived
        self.foreign_progress = 0.0  # when a vector another process logged last arrived
        self.vector_progress = 0.0  # when a vector of this model last arrived (logged or lent)
        self.vectors_came = threading.Condition(self.lock)  # notified as they arrive

    def reset(self, entries: Sequence[MemoryEntry]) -> None:
        """Start again from `entries` (as read from LanceDB, packed; caller holds the lock).
        Each entry is rebuilt here for a moment only: the view keeps the packed records."""
        self.view = View.of(entries)
        self.loaded_live = self.view.live_count
        self.rows = Rows(max(1024, len(entries) + 1024))
        self.pending = MappingProxyType({})
        self.terms = Postings()
        self.foreign = {}  # what was there when this process looked is fair game
        keys = np.zeros(len(entries), dtype=np.uint64)  # the duplicate map's, live entries'
        ids = np.empty(len(entries), dtype=object)
        live = 0
        for e in entries:
            self.rows.put(e)
            if e.live:
                keys[live], ids[live] = ops.entry_dup_key(e), e.id
                live += 1
        self.dups = DupIndex(keys[:live], ids[:live])

    def want_vectors(self) -> None:
        if not self.vectors_wanted.is_set():  # the hook only on a change: not on every save
            self.vectors_wanted.set()
            if self._on_vectors_wanted is not None:
                self._on_vectors_wanted()

    def checkpointed(self, through: int) -> None:
        """The index now holds the changes up to `through`: they are no longer pending."""
        self.indexed = through
        self.pending = MappingProxyType({i: p for i, p in self.pending.items() if p[0] > through})
        # the terms of checkpointed entries are in the index now: drop them, or this cache
        # would hold every entry ever searched while pending
        self.terms.keep_only(self.pending)

    def apply(self, records: Sequence[Record]) -> None:
        """Apply log records (caller holds the lock) as one change: the view, the pending map
        and the overlay are copied once per catch-up, not once per record (a reader behind a
        writer saving back to back copied them for each of its records). The last change of
        an entry wins; a vector for text that changed again later is refused by its hash."""
        changes: ops.Changes = {}
        seqs: dict[str, int] = {}  # each changed entry's last record
        vectors: list[Op] = []
        for record in records:
            changed, logged = ops.split_record(record)
            changes.update(changed)
            seqs.update(dict.fromkeys(changed, record.seq))
            vectors.extend(logged)
        if changes:
            self.change(changes, seqs)
        for op in vectors:  # another embedder's vectors are not this process's business
            self._take_vector(op)
        if any(op["m"] == self.model for op in vectors):
            self.vector_progress = time.monotonic()
            self.vectors_came.notify_all()

    def _take_vector(self, op: Op) -> None:
        if op["m"] == self.model and self.foreign.pop(str(op["id"]), None) is not None:
            self.foreign_progress = time.monotonic()
        target = self.view.get(str(op["id"]))
        if (
            op["m"] == self.model
            and target is not None
            and target.live
            and text_hash(target.content) == op["h"]
        ):
            # a vector lent for this very text (a change drops it from `unlogged`) is held
            # already: setting it again cost the backfill's commit 4-6 ms of its write lock
            # for a batch of 64, which the saves queued behind (issue 57)
            lent = target.id in self.unlogged and self.rows.model == self.model
            if not (lent and self.rows.has_vector(target.id)):
                self.rows.set_vector(target.id, str(op["m"]), ops.vector_of(op))
            self.unlogged.discard(target.id)

    def change(self, changes: Mapping[str, MemoryEntry | None], seqs: Mapping[str, int]) -> None:
        """Set entries (None: gone); an entry whose record (`seqs`, none: 0) is past the
        checkpoint the index holds is pending as of that record, and so are its neighbours
        (their contextual field changed). Records read after the checkpoint that folded them
        (this process was idle while another wrote and folded them) are in the index: marked
        pending, they were scored outside it by every search until the next checkpoint."""
        view = self.view
        now = time.monotonic()
        pending = dict(self.pending)
        marked: dict[str, int] = {}
        for entry_id, new in changes.items():
            self._change_one(entry_id, view.get(entry_id), new)
            self.terms.drop(entry_id)
            if (seq := seqs.get(entry_id, 0)) > self.indexed:
                marked[entry_id] = seq
        if self.rows.linked:
            for entry_id, seq in list(marked.items()):
                for other in self.rows.neighbours(entry_id):
                    if other not in changes and view.get(other) is not None:
                        marked[other] = max(seq, marked.get(other, 0))
                        self.terms.drop(other)
        for entry_id, seq in marked.items():
            pending[entry_id] = (seq, pending.get(entry_id, (0, now))[1])
        self.view = view.with_changes(changes)
        self.pending = MappingProxyType(pending)
        if self.model is not None and any(  # not for another process's saves: it embeds them
            n is not None and n.live and i not in self.foreign for i, n in changes.items()
        ):
            self.want_vectors()

    def _change_one(self, entry_id: str, old: MemoryEntry | None, new: MemoryEntry | None) -> None:
        """The duplicate map, rows and vectors of one changed entry."""
        if old is not None and old.live:
            key = ops.entry_dup_key(old)
            if self.dups.get(key) == entry_id:
                del self.dups[key]
        if new is None or not new.live or (old is not None and old.content != new.content):
            self.unlogged.discard(entry_id)
        self._note_origin(entry_id, old, new)
        if new is None:
            self.rows.remove(entry_id)
            return
        self.rows.put(new)
        if new.live:
            self.dups[ops.entry_dup_key(new)] = entry_id
        if not new.live or (old is not None and old.content != new.content):
            self.rows.drop_vector(entry_id)

    def _note_origin(self, entry_id: str, old: MemoryEntry | None, new: MemoryEntry | None) -> None:
        """Remember a memory another process saved and will embed; forget one that needs no
        vector now or that this process saved itself."""
        if entry_id in self.mine:
            self.mine.discard(entry_id)
            self.foreign.pop(entry_id, None)
        elif new is None or not new.live or self.model is None:
            self.foreign.pop(entry_id, None)
        elif old is None or not old.live or old.content != new.content:
            self.foreign.setdefault(entry_id, time.monotonic())

    def claimed(self) -> set[str]:
        """Entries without a vector that another process saved and is still expected to
        embed (see FOREIGN_GRACE)."""
        now = time.monotonic()
        with self.lock:
            since = self.foreign_progress
            return {i for i, t in self.foreign.items() if now - max(t, since) < FOREIGN_GRACE}

    def unclaimed_in(self) -> float | None:
        """Seconds until the first claimed entry becomes this process's to embed (None: no
        entry is claimed)."""
        with self.lock:
            for entry_id in [i for i in self.foreign if self.rows.has_vector(i)]:
                del self.foreign[entry_id]  # e.g. read from LanceDB after a checkpoint
            if not self.foreign:
                return None
            first = max(min(self.foreign.values()), self.foreign_progress)
        return max(0.0, first + FOREIGN_GRACE - time.monotonic())

    def adopt(self, stored: Mapping[str, StoredVector]) -> None:
        """Take stored vectors (caller holds the lock), except for entries that already have
        one or whose text changed since the vector was made."""
        assert self.model is not None
        for entry_id, vector in stored.items():
            entry = self.view.get(entry_id)
            if entry is None or self.rows.has_vector(entry_id):
                continue
            if text_hash(entry.content) == vector.text_hash:
                self.rows.set_vector(entry_id, self.model, vector.values)

    def adopt_block(self, ids: Sequence[str], hashes: Sequence[str], matrix: Matrix) -> None:
        """`adopt` for a block of stored vectors read in bulk (caller holds the lock): rows
        are matched to entries by the digest of their packed text, without rebuilding them."""
        assert self.model is not None
        rows_of, view, rows = self.rows.row_of, self.view, self.rows
        picked: list[int] = []
        at: list[int] = []
        for k, (entry_id, digest) in enumerate(zip(ids, hashes, strict=True)):
            row = rows_of.get(entry_id)
            if row is None or rows.has_vec[row] or view.text_hash(entry_id) != digest:
                continue
            picked.append(k)
            at.append(row)
        if picked:
            block = matrix[np.asarray(picked, dtype=np.int64)]
            rows.set_vectors(self.model, block, np.asarray(at, dtype=np.int64))

    def doc(self, entry: MemoryEntry) -> IndexDoc:
        """The index document of `entry`: its text, and the text of the live memories saved
        just before and after it by the same caller (the contextual field)."""
        around = [
            e.content
            for i in self.rows.neighbours(entry.id)
            if (e := self.view.get(i)) is not None and e.live
        ]
        context = "\n".join(around)
        project = entry.metadata.get(PROJECT) or None
        return IndexDoc(entry.id, entry.content, entry.category, entry.tags, context, project)

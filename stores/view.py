"""What readers read: an immutable view of the entries, and a columnar mirror for top-k.

`View` is never changed after it is made: a writer builds the next one (a shared base dict
plus a small copy-on-write overlay, folded into a new base now and then) and swaps the
reference, so a search works on one consistent set of entries however long it takes and
never waits for a writer.

`Rows` keeps one row per entry this process has seen, in preallocated numpy columns (live
flag, last-seen time, category id, the embedder's vector), so filters are boolean masks and
the vector scan is one matrix product over a contiguous matrix. Rows only grow; columns are
changed in place for existing rows or replaced whole when they grow, so a reader that took a
row count and the column references sees valid data. Every hit is checked against the View,
which is the truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from dreamwell.stores.model import FOLLOWS, MemoryEntry, VectorLike

Matrix = npt.NDArray[np.float32]
_FOLD_AT = 4096  # overlay size at which it is folded into a new base


@dataclass(frozen=True)
class View:
    base: Mapping[str, MemoryEntry] = field(default_factory=lambda: MappingProxyType({}))
    over: Mapping[str, MemoryEntry | None] = field(default_factory=lambda: MappingProxyType({}))
    categories: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    live_count: int = 0

    def get(self, entry_id: str) -> MemoryEntry | None:
        if entry_id in self.over:
            return self.over[entry_id]
        return self.base.get(entry_id)

    def values(self) -> Iterator[MemoryEntry]:
        for entry_id, entry in self.base.items():
            if entry_id not in self.over:
                yield entry
        for changed in self.over.values():
            if changed is not None:
                yield changed

    def with_changes(self, changes: Mapping[str, MemoryEntry | None]) -> View:
        """A new view with `changes` applied (None deletes); this one is left as it was."""
        counts = dict(self.categories)
        live = self.live_count
        for entry_id, new in changes.items():
            old = self.get(entry_id)
            if old is not None and old.live:
                live -= 1
                if old.category:
                    counts[old.category] -= 1
                    if counts[old.category] == 0:
                        del counts[old.category]
            if new is not None and new.live:
                live += 1
                if new.category:
                    counts[new.category] = counts.get(new.category, 0) + 1
        over = {**self.over, **changes}
        if len(over) < _FOLD_AT:
            return View(self.base, MappingProxyType(over), MappingProxyType(counts), live)
        base = dict(self.base)
        for entry_id, new in over.items():
            if new is None:
                base.pop(entry_id, None)
            else:
                base[entry_id] = new
        return View(MappingProxyType(base), MappingProxyType({}), MappingProxyType(counts), live)

    @staticmethod
    def of(entries: Iterable[MemoryEntry]) -> View:
        return View().with_changes({e.id: e for e in entries})


class Rows:
    """Columns per entry row: live, last seen (epoch s), category id, vector."""

    def __init__(self, capacity: int = 1024) -> None:
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.live: npt.NDArray[Any] = np.zeros(capacity, dtype=bool)
        self.seen: npt.NDArray[Any] = np.zeros(capacity, dtype=np.float64)
        self.cat: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int32)
        self.has_vec: npt.NDArray[Any] = np.zeros(capacity, dtype=bool)
        # contextual links: the row this entry follows (saved just before it by the same
        # caller) and the row that follows it; -1 for none. A row's contextual vector is the
        # normalised sum of its vector and its neighbours', kept as the sum's norm only.
        self.prev: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int64)
        self.next: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int64)
        self.ctx_norm: npt.NDArray[Any] = np.ones(capacity, dtype=np.float32)
        self.linked = 0
        self.vec: npt.NDArray[Any] | None = None
        self.model: str | None = None
        self.cat_names: list[str] = []
        self._cat_id: dict[str, int] = {}
        self.tag_rows: dict[str, set[int]] = {}
        self._tags: dict[int, tuple[str, ...]] = {}

    @property
    def n(self) -> int:
        return len(self.ids)

    def vector_count(self) -> int:
        n = self.n
        return int((self.has_vec[:n] & self.live[:n]).sum())

    # ---- changes (one writer thread at a time: the store's apply mutex) ---------------------
    def _row(self, entry_id: str) -> int:
        row = self.row_of.get(entry_id)
        if row is not None:
            return row
        row = len(self.ids)
        if row >= len(self.live):
            self._grow(2 * len(self.live))
        self.ids.append(entry_id)
        self.row_of[entry_id] = row
        return row

    def _grow(self, capacity: int) -> None:
        def grown(old: npt.NDArray[Any], fill: object) -> npt.NDArray[Any]:
            new = np.full((capacity, *old.shape[1:]), fill, dtype=old.dtype)
            new[: len(old)] = old
            return new

        self.live = grown(self.live, False)
        self.seen = grown(self.seen, 0.0)
        self.cat = grown(self.cat, -1)
        self.has_vec = grown(self.has_vec, False)
        self.prev = grown(self.prev, -1)
        self.next = grown(self.next, -1)
        self.ctx_norm = grown(self.ctx_norm, 1.0)
        if self.vec is not None:
            self.vec = grown(self.vec, 0.0)

    def put(self, entry: MemoryEntry) -> None:
        row = self._row(entry.id)
        self.seen[row] = entry.last_seen_at.timestamp()
        cat = -1
        if entry.category:
            cat = self._cat_id.get(entry.category, -1)
            if cat < 0:
                cat = len(self.cat_names)
                self.cat_names.append(entry.category)
                self._cat_id[entry.category] = cat
        self.cat[row] = cat
        old_tags = self._tags.get(row, ())
        if old_tags != entry.tags:
            for tag in old_tags:
                self.tag_rows.get(tag, set()).discard(row)
            for tag in entry.tags:
                self.tag_rows.setdefault(tag, set()).add(row)
            self._tags[row] = entry.tags
        self.live[row] = entry.live
        follows = entry.metadata.get(FOLLOWS)
        self._link(row, self._row(follows) if follows and follows != entry.id else -1)
        self._refresh(row)

    def _link(self, row: int, prev: int) -> None:
        old = int(self.prev[row])
        if old == prev:
            return
        if old >= 0 and self.next[old] == row:
            self.next[old] = -1
            self._refresh(old)
        self.linked += (prev >= 0) - (old >= 0)
        self.prev[row] = prev
        if prev >= 0:
            self.next[prev] = row

    def _refresh(self, row: int) -> None:
        """Recompute the contextual norms of `row` and its neighbours after a change."""
        for r in (row, int(self.prev[row]), int(self.next[row])):
            if r >= 0:
                self.ctx_norm[r] = self._ctx_norm(r)

    def _ctx_norm(self, row: int) -> float:
        if self.vec is None or not self.has_vec[row]:
            return 1.0
        total = self.vec[row].copy()
        for r in (int(self.prev[row]), int(self.next[row])):
            if r >= 0 and self.has_vec[r] and self.live[r]:
                total += self.vec[r]
        return max(float(np.linalg.norm(total)), 1e-6)

    def neighbours(self, entry_id: str) -> list[str]:
        """Ids of the entries saved just before and just after this one (contextual links)."""
        row = self.row_of.get(entry_id)
        if row is None:
            return []
        return [self.ids[r] for r in (int(self.prev[row]), int(self.next[row])) if r >= 0]

    def remove(self, entry_id: str) -> None:
        row = self.row_of.get(entry_id)
        if row is not None:
            self.live[row] = False
            self.has_vec[row] = False
            self._refresh(row)

    def set_vector(self, entry_id: str, model: str, vector: VectorLike) -> None:
        """Take a vector of `model`; vectors of another model or dimension reset the matrix."""
        array = np.asarray(vector, dtype=np.float32)
        if self.model != model or self.vec is None or self.vec.shape[1] != len(array):
            self.model = model
            self.vec = np.zeros((len(self.live), len(array)), dtype=np.float32)
            self.has_vec[:] = False
        row = self._row(entry_id)
        assert self.vec is not None
        self.vec[row] = array
        self.has_vec[row] = True
        self._refresh(row)

    def drop_vector(self, entry_id: str) -> None:
        row = self.row_of.get(entry_id)
        if row is not None:
            self.has_vec[row] = False
            self._refresh(row)

    def has_vector(self, entry_id: str) -> bool:
        row = self.row_of.get(entry_id)
        return row is not None and bool(self.has_vec[row])

    # ---- reads ----------------------------------------------------------------------------
    def mask(self, category: str | None, tags: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Live rows under the category prefix (segment boundary) carrying every tag."""
        n = self.n
        mask = self.live[:n].copy()
        if category is not None:
            allowed = [
                i
                for i, name in enumerate(list(self.cat_names))
                if name == category or name.startswith(category + "/")
            ]
            mask &= np.isin(self.cat[:n], np.asarray(allowed, dtype=np.int32))
        for tag in tags:
            rows = np.fromiter(list(self.tag_rows.get(tag, ())), dtype=np.int64)
            tagged = np.zeros(n, dtype=bool)
            tagged[rows[rows < n]] = True
            mask &= tagged
        return mask

    def vector_top(
        self,
        query: Sequence[float],
        limit: int,
        mask: npt.NDArray[np.bool_],
        contextual: bool = False,
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """(id, cosine) best first among masked rows that have a vector (unit vectors), and
        with `contextual` the same for contextual vectors: each row's vector summed with the
        vectors of the rows saved just before and after it, normalised (a row with no
        neighbours is its own context). One matrix product serves both."""
        vec = self.vec
        n = min(len(mask), self.n)
        if vec is None or n == 0 or vec.shape[1] != len(query):
            return [], []
        allowed = mask[:n] & self.has_vec[:n]
        k = min(limit, int(allowed.sum()))
        if k <= 0:
            return [], []
        scores = vec[:n] @ np.asarray(query, dtype=np.float32)
        context: list[tuple[str, float]] = []
        if contextual and self.linked:
            summed = scores.copy()
            usable = self.has_vec[:n] & self.live[:n]
            for links in (self.prev[:n], self.next[:n]):
                rows = np.flatnonzero((links >= 0) & (links < n))
                rows = rows[usable[links[rows]]]
                summed[rows] += scores[links[rows]]
            summed /= self.ctx_norm[:n]
            context = self._top(summed, allowed, k)
        return self._top(scores, allowed, k), context

    def _top(
        self, scores: npt.NDArray[Any], allowed: npt.NDArray[np.bool_], k: int
    ) -> list[tuple[str, float]]:
        scores = np.where(allowed, scores, -np.inf)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in top]

    def recent(self, limit: int, mask: npt.NDArray[np.bool_]) -> list[str]:
        """Ids of masked rows, most recently seen first."""
        n = min(len(mask), self.n)
        rows = np.flatnonzero(mask[:n])
        if len(rows) == 0:
            return []
        seen = self.seen[rows]
        k = min(limit, len(rows))
        top = np.argpartition(-seen, k - 1)[:k]
        top = top[np.argsort(-seen[top], kind="stable")]
        return [self.ids[rows[i]] for i in top]

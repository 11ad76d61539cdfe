"""The columns of `Rows` (stores/index/rows.py): one row per entry this process has seen, in
preallocated numpy columns (live flag, last-seen time, category id, project id, has-a-vector,
tags), and
the contextual links between rows (the row an entry follows, saved just before it by the same
caller, and the row that follows it), so filters are boolean masks and a row's neighbours are
a few array reads.

Rows only grow; columns are changed in place for existing rows or replaced whole when they
grow, so a reader that took a row count and the column references sees valid data. What a row
derives from its neighbours' vectors (the contextual norms) is `Rows`' to recompute: a link
change calls `_refresh`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index.tagsets import TagSets
from dreamwell.stores.model import (
    FOLLOWS,
    PROJECT,
    MemoryEntry,
    check_categories,
    under_any,
)

RADIUS = 2  # contextual links followed each way for the contextual vector (up to 4 neighbours)
TEXT_RADIUS = 1  # ... and for the contextual keyword field: two links there doubled what the
# background index work per save costs (save p50 at 10k 7.0 -> 11.2 ms) for no recall
# (dev split R@10 .774 with one link, .777 with two: tests/bench/tune_hybrid.py --levers)


class RowColumns:
    """Columns per entry row: live, last seen (epoch s), category id, has a vector, tags, and
    the links to the rows saved just before and after it."""

    def __init__(self, capacity: int = 1024) -> None:
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.live: npt.NDArray[Any] = np.zeros(capacity, dtype=bool)
        self.seen: npt.NDArray[Any] = np.zeros(capacity, dtype=np.float64)
        self.cat: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int32)
        self.has_vec: npt.NDArray[Any] = np.zeros(capacity, dtype=bool)
        # contextual links: the row this entry follows (saved just before it by the same
        # caller) and the row that follows it; -1 for none. A row's contextual vector is the
        # normalised sum of its vector and those of its neighbours up to RADIUS links away
        # each way, kept as the sum's norm only.
        self.prev: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int64)
        self.next: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int64)
        self._relinked = 0  # link changes so far: a search's link arrays are kept until then
        self._hops: tuple[int, int, list[npt.NDArray[np.int64]]] | None = None
        self.ctx_norm: npt.NDArray[Any] = np.ones(capacity, dtype=np.float32)
        self.linked = 0
        self.cat_names: list[str] = []
        self._cat_id: dict[str, int] = {}
        # the project of each row (-1: global), as ids into proj_names
        self.proj: npt.NDArray[Any] = np.full(capacity, -1, dtype=np.int32)
        self.proj_names: list[str] = []
        self._proj_id: dict[str, int] = {}
        self.tags = TagSets(capacity)

    @property
    def n(self) -> int:
        return len(self.ids)

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
            # zeros come from calloc: the kernel maps the unused capacity's pages when they
            # are written, where np.full wrote them all (24 MiB of vectors at 100,000 rows)
            shape = (capacity, *old.shape[1:])
            new = np.zeros(shape, old.dtype) if not fill else np.full(shape, fill, old.dtype)
            new[: len(old)] = old
            return new

        self.live = grown(self.live, False)
        self.seen = grown(self.seen, 0.0)
        self.cat = grown(self.cat, -1)
        self.proj = grown(self.proj, -1)
        self.has_vec = grown(self.has_vec, False)
        self.prev = grown(self.prev, -1)
        self.next = grown(self.next, -1)
        self.ctx_norm = grown(self.ctx_norm, 1.0)
        self.tags.grow(capacity)

    def _refresh(self, row: int) -> None:
        """`row`'s links changed: what it derives from its neighbours is recomputed (Rows)."""

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
        self.proj[row] = self._project_id(entry.metadata.get(PROJECT))
        self.tags.put(row, entry.tags, self.n)
        self.live[row] = entry.live
        follows = entry.metadata.get(FOLLOWS)
        self._link(row, self._row(follows) if follows and follows != entry.id else -1)
        self._refresh(row)

    def _project_id(self, key: str | None) -> int:
        if not key:
            return -1
        found = self._proj_id.get(key)
        if found is None:
            found = self._proj_id[key] = len(self.proj_names)
            self.proj_names.append(key)
        return found

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
        self._relinked += 1

    def _around(self, row: int, radius: int = RADIUS) -> list[int]:
        """Rows up to `radius` links before and after `row` (nearest first, before then
        after)."""
        out: list[int] = []
        for links in (self.prev, self.next):
            r = row
            for _ in range(radius):
                r = int(links[r])
                if r < 0 or r == row:
                    break
                out.append(r)
        return out

    def neighbours(self, entry_id: str) -> list[str]:
        """Ids of the entries whose text is in this one's contextual keyword field: those
        saved around it by the same caller, up to TEXT_RADIUS links each way."""
        row = self.row_of.get(entry_id)
        if row is None:
            return []
        return [self.ids[r] for r in self._around(row, TEXT_RADIUS)]

    def remove(self, entry_id: str) -> None:
        row = self.row_of.get(entry_id)
        if row is not None:
            self.live[row] = False
            self.has_vec[row] = False
            self._refresh(row)

    # ---- reads ----------------------------------------------------------------------------
    def mask(
        self, category: str | Sequence[str] | None, tags: Sequence[str], project: str | None = None
    ) -> npt.NDArray[np.bool_]:
        """Live rows under the category prefix, or one of several (segment boundary),
        carrying every tag, and, with `project`, of that project or global."""
        n = self.n
        mask = self.live[:n].copy()
        if project is not None:
            known = self._proj_id.get(project, -1)
            mask &= (self.proj[:n] == -1) | (self.proj[:n] == known)
        if cats := check_categories(category):
            allowed = [i for i, name in enumerate(list(self.cat_names)) if under_any(name, cats)]
            mask &= np.isin(self.cat[:n], np.asarray(allowed, dtype=np.int32))
        for tag in tags:
            mask &= self.tags.mask(tag, n)
        return mask

    def categories(self, project: str) -> list[tuple[str, int]]:
        """(category, live memories) of `project`'s memories and global ones."""
        mask = self.mask(None, (), project)
        cats = self.cat[: len(mask)][mask]
        counts = np.bincount(cats[cats >= 0])
        names = list(self.cat_names)  # after the ids were read: a new id's name is appended first
        return [(names[i], int(counts[i])) for i in np.flatnonzero(counts).tolist()]

    def live_in(self, project: str) -> int:
        """How many live memories `project` and the global ones hold."""
        return int(self.mask(None, (), project).sum())

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

    def links(self, n: int) -> tuple[list[npt.NDArray[np.int64]], int]:
        """Per row 0..n-1, the row 1..RADIUS links before it and after it (-1: none), and a
        bound on the rows they name. Built once per change of the links (a million rows:
        12 ms) and kept: rows added since without a link need no rebuild, as their slots
        were made -1 up to the capacity."""
        relinked, cached = self._relinked, self._hops
        if cached is not None and cached[0] == relinked and n <= len(cached[2][0]):
            return [hop[:n] for hop in cached[2]], cached[1]
        known = self.n  # rows up to here are in the arrays built below
        capacity = len(self.prev)
        hops = []
        for links in (self.prev, self.next):
            step = np.full(capacity + 1, -1, dtype=np.int64)
            step[:known] = np.where(links[:known] < known, links[:known], -1)
            hop = step[:capacity]
            for _ in range(RADIUS):
                hops.append(hop)
                hop = step[hop]
        self._hops = (relinked, known, hops)  # one tuple, swapped whole
        return [hop[:n] for hop in hops], known

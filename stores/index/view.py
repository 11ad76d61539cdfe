"""What readers read: an immutable view of the entries, and a columnar mirror for top-k.

`View` is never changed after it is made: a writer builds the next one (a shared base dict
plus a small copy-on-write overlay, folded into a new base now and then) and swaps the
reference, so a search works on one consistent set of entries however long it takes and
never waits for a writer.

`Rows` keeps one row per entry this process has seen, in preallocated numpy columns (live
flag, last-seen time, category id, the embedder's vector), so filters are boolean masks.
Rows only grow; columns are changed in place for existing rows or replaced whole when they
grow, so a reader that took a row count and the column references sees valid data. Every
hit is checked against the View, which is the truth.

Vectors are held as float32 while a store has no more than RESCORE of them, then as one
int8 per dimension from their mean (`stores/index/held_vectors.py`: a quarter of float32's memory,
cosines within ~1e-3 of float32's).

The vector search over `Rows` is in `stores/index/vector_rank.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index import ivf, vector_rank
from dreamwell.stores.index.held_vectors import Held
from dreamwell.stores.index.packed_entries import (
    Brief,
    Packed,
    brief,
    entries_of,
    filtered_importance,
    is_live,
    live_importance,
    pack,
    text_digest,
    unpack,
)
from dreamwell.stores.index.sign_codes import sign_words
from dreamwell.stores.index.tagsets import TagSets
from dreamwell.stores.model import FOLLOWS, MemoryEntry, VectorLike, text_hash

Matrix = npt.NDArray[np.float32]
_FOLD_AT = 4096  # overlay size at which it is folded into a new base
RESCORE = 2048  # rows given an exact cosine after the sign-bit scan
RADIUS = 2  # contextual links followed each way for the contextual vector (up to 4 neighbours)
TEXT_RADIUS = 1  # ... and for the contextual keyword field: two links there doubled what the
# background index work per save costs (save p50 at 10k 7.0 -> 11.2 ms) for no recall
# (dev split R@10 .774 with one link, .777 with two: tests/bench/tune_hybrid.py --levers)


def _widened(bits: npt.NDArray[np.uint64], capacity: int) -> npt.NDArray[np.uint64]:
    """Sign bits (words x rows, word-major: a scan reads each word's row contiguously) with
    room for `capacity` rows."""
    out = np.zeros((bits.shape[0], capacity), dtype=np.uint64)
    out[:, : bits.shape[1]] = bits
    return out


@dataclass(frozen=True)
class View:
    """The entries: `base` holds them packed (`stores/index/packed_entries.py`: one bytes object
    each, an entry rebuilt when read), `over` the changes since the last fold as entries."""

    base: Mapping[str, Packed] = field(default_factory=lambda: MappingProxyType({}))
    over: Mapping[str, MemoryEntry | None] = field(default_factory=lambda: MappingProxyType({}))
    categories: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    live_count: int = 0
    size: int = 0  # entries, live and archived

    def get(self, entry_id: str) -> MemoryEntry | None:
        if entry_id in self.over:
            return self.over[entry_id]
        record = self.base.get(entry_id)
        return None if record is None else unpack(entry_id, record)

    def brief(self, entry_id: str) -> Brief | None:
        """What a search filters and ranks on (live, category, tags, importance), without
        rebuilding the entry."""
        if entry_id in self.over:
            entry = self.over[entry_id]
            return None if entry is None else brief(entry)
        record = self.base.get(entry_id)
        return None if record is None else brief(record)

    def importance(self, entry_id: str) -> float | None:
        """The importance of a live entry; None when it is gone or archived."""
        if entry_id in self.over:
            entry = self.over[entry_id]
            return entry.importance if entry is not None and entry.live else None
        record = self.base.get(entry_id)
        return None if record is None else live_importance(record)

    def text_hash(self, entry_id: str) -> str | None:
        """`model.text_hash` of an entry's text (None: no such entry), without rebuilding it."""
        if entry_id in self.over:
            entry = self.over[entry_id]
            return None if entry is None else text_hash(entry.content)
        record = self.base.get(entry_id)
        return None if record is None else text_digest(record)

    def filtered_importance(
        self, entry_id: str, category: bytes | None, tags: Sequence[bytes]
    ) -> float | None:
        """`importance` for an entry under `category` (a prefix at a segment boundary)
        carrying every one of `tags` (both UTF-8); None otherwise."""
        if entry_id in self.over:
            return _entry_weight(self.over[entry_id], category, tags)
        record = self.base.get(entry_id)
        if isinstance(record, bytes):
            return filtered_importance(record, category, tags)
        return _entry_weight(record, category, tags)  # None, or an entry kept as it is

    def values(self) -> Iterator[MemoryEntry]:
        for entry_id, record in self.base.items():
            if entry_id not in self.over:
                yield unpack(entry_id, record)
        for changed in self.over.values():
            if changed is not None:
                yield changed

    def with_changes(self, changes: Mapping[str, MemoryEntry | None]) -> View:
        """A new view with `changes` applied (None deletes); this one is left as it was."""
        counts = dict(self.categories)
        live, size = self.live_count, self.size
        for entry_id, new in changes.items():
            old = self.brief(entry_id)
            size += (new is not None) - (old is not None)
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
            return View(self.base, MappingProxyType(over), MappingProxyType(counts), live, size)
        base = dict(self.base)
        for entry_id, new in over.items():
            if new is None:
                base.pop(entry_id, None)
            else:
                base[entry_id] = pack(new)
        return View(
            MappingProxyType(base), MappingProxyType({}), MappingProxyType(counts), live, size
        )

    @staticmethod
    def of(entries: Sequence[MemoryEntry]) -> View:
        """The view of `entries` (a PackedEntries' records are taken as they are)."""
        base: dict[str, Packed] = dict(entries_of(entries))  # the last of an id wins
        counts: dict[str, int] = {}
        live = 0
        for record in base.values():
            if is_live(record):
                live += 1
                category = brief(record).category
                if category:
                    counts[category] = counts.get(category, 0) + 1
        frozen = MappingProxyType(base)
        return View(frozen, categories=MappingProxyType(counts), live_count=live, size=len(base))


def _entry_weight(
    entry: MemoryEntry | None, category: bytes | None, tags: Sequence[bytes]
) -> float | None:
    """`View.filtered_importance` of an entry held as an object."""
    if entry is None or not entry.live:
        return None
    if any(t.decode("utf-8", "surrogatepass") not in entry.tags for t in tags):
        return None
    if category is not None:
        held = (entry.category or "").encode("utf-8", "surrogatepass")
        if held != category and not held.startswith(category + b"/"):
            return None
    return entry.importance


class Rows:
    """Columns per entry row: live, last seen (epoch s), category id, vector."""

    def __init__(self, capacity: int = 1024, rescore: int = RESCORE) -> None:
        self.rescore = rescore
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
        self._set = 0  # vectors set since the matrix was made (at least the rows with one)
        self.vec: Held | None = None  # rows x dim: float32, int8 past RESCORE vectors
        # (centre, words x rows): sign bits of (vector - centre), word-major; None until the
        # store has more than RESCORE vectors. One tuple, swapped whole, so that a reader
        # always pairs bits with the centre they were made from.
        self.codes: tuple[Matrix, npt.NDArray[np.uint64]] | None = None
        self._centred_at = 0  # vectors set when the centre was last computed
        # from ivf.INDEX_AT vectors: lists over the rows (stores/index/ivf.py), and every row's
        # contextual vector's sign bits (words x rows, from the same centre)
        self.index: ivf.Index | None = None
        self.defer_index = False  # while a store's vectors load: the lists once at the end
        self.ctx_bits: npt.NDArray[np.uint64] | None = None
        self.model: str | None = None
        self.cat_names: list[str] = []
        self._cat_id: dict[str, int] = {}
        self.tags = TagSets(capacity)

    @property
    def n(self) -> int:
        return len(self.ids)

    def vector_count(self) -> int:
        n = self.n
        return int(np.count_nonzero(self.has_vec[:n] & self.live[:n]))  # .sum(): 8x slower

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
        self.has_vec = grown(self.has_vec, False)
        self.prev = grown(self.prev, -1)
        self.next = grown(self.next, -1)
        self.ctx_norm = grown(self.ctx_norm, 1.0)
        self.tags.grow(capacity)
        if self.vec is not None:
            self.vec = self.vec.grown(capacity)
        if self.codes is not None:
            self.codes = (self.codes[0], _widened(self.codes[1], capacity))
        if self.ctx_bits is not None:
            self.ctx_bits = _widened(self.ctx_bits, capacity)

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
        self.tags.put(row, entry.tags, self.n)
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

    def _refresh(self, row: int) -> None:
        """Recompute the contextual norms of `row` and of every row whose context holds it."""
        self._refresh_many(np.array([row], dtype=np.int64))

    def _ctx_total(self, row: int) -> Matrix | None:
        """The sum of `row`'s vector and its usable neighbours' (None: it has no vector or no
        such neighbour, and is its own context)."""
        if self.vec is None or not self.has_vec[row]:
            return None
        around = [r for r in self._around(row) if self.has_vec[r] and self.live[r]]
        if not around:
            return None
        total: Matrix = self.vec.rows([row, *around]).sum(axis=0)
        return total

    def _ctx_norm(self, row: int) -> float:
        total = self._ctx_total(row)
        if total is None:  # its own context: scored as the plain cosine is (unit vectors)
            return 1.0
        return max(float(np.linalg.norm(total)), 1e-6)

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

    def set_vector(self, entry_id: str, model: str, vector: VectorLike) -> None:
        """Take a vector of `model`; vectors of another model or dimension reset the matrix."""
        row = self._row(entry_id)
        self.set_vectors(model, np.asarray(vector, dtype=np.float32)[None, :], np.array([row]))

    def set_vectors(self, model: str, block: Matrix, rows: npt.NDArray[np.int64]) -> None:
        """Set the vectors of `rows` (float32) in that order, as one by one: the centres are
        computed at the same counts, so the held rows and sign bits, and with them every
        search, come out the same however they arrive. Loading a store's vectors this way
        makes no object per vector."""
        if len(rows) == 0:
            return
        if self.model != model or self.vec is None or self.vec.dim != block.shape[1]:
            self.model = model
            self.vec = Held.empty(len(self.live), block.shape[1])
            self.codes = None
            self.index = self.ctx_bits = None
            self._centred_at = 0
            self.has_vec[:] = False
            self._set = 0
        assert self.vec is not None
        done = 0
        while done < len(rows):
            if self.codes is None:  # centred once the count passes RESCORE
                room = max(self.rescore + 1 - self._set, 1)
            else:  # and again when it reaches four times the count at the last centring
                room = max(4 * self._centred_at - self._set, 1)
            part = slice(done, done + room)
            self.vec.put(rows[part], block[part])
            self.has_vec[rows[part]] = True
            self._set += len(rows[part])
            done += room
            if self.codes is not None and self._set < 4 * self._centred_at:
                centre, bits = self.codes
                bits[:, rows[part]] = sign_words(self.vec.rows(rows[part]) - centre).T
            elif self._set > self.rescore:
                self._centre()
        index = self.index
        if index is None and self.codes is not None and self._set >= ivf.INDEX_AT:
            self._index()
        elif index is not None and index is self.index and index.plain.add(rows):
            self._index(index)  # the tail is full
        self._refresh_many(rows)

    def _refresh_many(self, rows: npt.NDArray[np.int64]) -> None:
        """The contextual norms of linked `rows` and of the rows whose context holds them."""
        has_link = (self.prev[rows] >= 0) | (self.next[rows] >= 0)
        self.ctx_norm[rows[~has_link]] = 1.0  # its own context, as _ctx_norm has it
        touched: set[int] = set()
        for row in rows[has_link].tolist():
            touched.update((row, *self._around(row)))
        for row in sorted(touched):
            self.ctx_norm[row] = self._ctx_norm(row)
        self._relisted(np.union1d(rows, np.fromiter(touched, np.int64, len(touched))))

    def _relisted(self, rows: npt.NDArray[np.int64]) -> None:
        """With lists: the contextual sign bits of `rows`, whose context changed, and
        `rows` put in the contextual lists' tail (new lists when it is full)."""
        index, ctx_bits, codes = self.index, self.ctx_bits, self.codes
        if index is None or ctx_bits is None or codes is None:
            return
        rows = rows[self.has_vec[rows]]  # a row without a vector is never a candidate
        if len(rows) == 0:
            return
        ctx_bits[:, rows] = self._context_bits(rows, codes[0])
        if index.context.add(rows):
            self._index(index)  # the tail is full

    def _contexts(self, rows: npt.NDArray[np.int64]) -> Matrix:
        """The contextual vectors of `rows`, normalised: each row's vector plus its usable
        neighbours' (a row without is its own context; a row without a vector, zeros). A
        few rows (a save's) follow their links; many (the lists being made) use the link
        arrays, which a save's new link would make again at the size of the store."""
        assert self.vec is not None
        vec = self.vec
        out = np.zeros((len(rows), vec.dim), dtype=np.float32)
        if len(rows) <= 64:
            for i, row in enumerate(rows.tolist()):
                total = self._ctx_total(row)
                if total is not None:
                    out[i] = total
                elif self.has_vec[row]:
                    out[i] = vec.rows([row])[0]
        else:
            hops, _ = self.links(self.n)
            has = self.has_vec[rows]
            out[has] = vec.rows(rows[has])
            usable = self.has_vec[: self.n] & self.live[: self.n]
            for hop in hops:
                near = hop[rows]
                ok = near >= 0
                ok[ok] = usable[near[ok]]
                ok &= has
                out[ok] += vec.rows(near[ok])
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out

    def _context_bits(self, rows: npt.NDArray[np.int64], centre: Matrix) -> npt.NDArray[np.uint64]:
        """The sign bits of `rows`' contextual vectors from `centre` (words x rows)."""
        return sign_words(self._contexts(rows) - centre).T

    def _index(self, previous: ivf.Index | None = None) -> None:
        """Lists over the rows with a vector and over their contextual vectors, and every
        row's contextual sign bits. With `previous` (same centre) its quantisers and its rows'
        places are kept; else the quantisers are trained anew. Below ivf.INDEX_AT vectors
        (or while loading: `defer_index`), none."""
        codes, vec = self.codes, self.vec
        n = self.n
        ready = codes is not None and vec is not None and not self.defer_index
        rows = np.flatnonzero(self.has_vec[:n]) if ready else np.empty(0, dtype=np.int64)
        if len(rows) < ivf.INDEX_AT:
            self.index = self.ctx_bits = None
            return
        assert codes is not None and vec is not None
        centre, bits = codes
        if previous is not None and previous.centre is centre and self.ctx_bits is not None:
            # a set whose tail is not yet half full is kept: making lists costs O(rows)
            ctx_bits = self.ctx_bits
            plain, context = previous.plain, previous.context
            if plain.filling:
                plain = ivf.listed(plain.quantiser, rows, vec.rows, bits, plain)
            if context.filling:
                context = ivf.listed(context.quantiser, rows, self._contexts, ctx_bits, context)
        else:
            ctx_bits = np.zeros_like(bits)
            for start in range(0, n, ivf.BLOCK):
                block = np.arange(start, min(n, start + ivf.BLOCK))
                ctx_bits[:, block] = self._context_bits(block, centre)
            plain = ivf.listed(ivf.train(rows, vec.rows), rows, vec.rows, bits)
            context = ivf.listed(ivf.train(rows, self._contexts), rows, self._contexts, ctx_bits)
        self.ctx_bits = ctx_bits
        self.index = ivf.Index(centre, plain, context)

    def index_now(self) -> None:
        """End `defer_index` (a store's vectors are loaded): the lists, if there are enough
        vectors for them."""
        self.defer_index = False
        if self.index is None:
            self._index()

    def _centre(self) -> None:
        """(Re)compute the centre as the mean vector and every row's sign bits from it: when
        the store first has more than RESCORE vectors (when the held rows become int8 steps
        from that first centre, which then stays), and again each time it quadruples."""
        assert self.vec is not None
        n = self.n
        have = np.flatnonzero(self.has_vec[:n])
        total = np.zeros(self.vec.dim, dtype=np.float64)
        for start in range(0, len(have), 16384):  # in slices: no float32 copy of it all
            total += self.vec.rows(have[start : start + 16384]).sum(axis=0, dtype=np.float64)
        centre = (total / max(len(have), 1)).astype(np.float32)
        if not self.vec.quantized:
            self.vec = self.vec.to_int8(centre, n)
        bits = np.zeros((-(-self.vec.dim // 64), len(self.live)), dtype=np.uint64)
        for start in range(0, n, 16384):
            block = self.vec.rows(slice(start, min(n, start + 16384))) - centre
            bits[:, start : start + len(block)] = sign_words(block).T
        self.codes = (centre, bits)
        self._centred_at = self._set = len(have)
        self._index()

    def compacted(self, entries: Iterable[MemoryEntry]) -> Rows:
        """A new Rows with rows for `entries` only (the rows of deleted entries dropped) and
        the vectors this one holds for them, as a store opened afresh would have them: a link
        to an entry that is gone becomes a link to an empty row. This one is left as it was,
        for the readers still using it."""
        entries = list(entries)
        new = Rows(max(1024, len(entries) + 1024), self.rescore)
        for entry in entries:
            new.put(entry)
        if self.vec is not None and self.model is not None:
            n = self.n
            kept = [
                (row, new.row_of[entry_id])
                for entry_id, row in self.row_of.items()
                if row < n and self.has_vec[row] and entry_id in new.row_of
            ]
            if kept:
                old_rows, new_rows = np.array(kept, dtype=np.int64).T
                held = self.vec.taken(len(new.live), old_rows, new_rows)
                new.take_vectors(self.model, held, new_rows)
        return new

    def take_vectors(self, model: str, held: Held, rows: npt.NDArray[np.int64]) -> None:
        """Take `held` as the vectors, `rows` being those that have one, then compute the
        centre, the sign bits and the contextual norms: what set_vector does a row at a time
        (held rows are copied as they are: int8 ones keep their centre and are not rounded
        a second time)."""
        self.model = model
        self.vec = held
        self.has_vec[:] = False
        self.has_vec[rows] = True
        self.codes = None
        self._centred_at = 0
        self._set = len(rows)
        if self._set > self.rescore:
            self._centre()
        n = self.n
        for row in np.flatnonzero((self.prev[:n] >= 0) | (self.next[:n] >= 0)).tolist():
            self.ctx_norm[row] = self._ctx_norm(row)

    def drop_vector(self, entry_id: str) -> None:
        row = self.row_of.get(entry_id)
        if row is not None:
            self.has_vec[row] = False
            self._refresh(row)

    def has_vector(self, entry_id: str) -> bool:
        row = self.row_of.get(entry_id)
        return row is not None and bool(self.has_vec[row])

    def without_vector(self, limit: int) -> list[str]:
        """Ids of up to `limit` live rows without a vector, oldest row first: one mask over
        the columns (a loop over 100,000 rows in Python took 10 ms, after every save)."""
        live, has_vec = self.live, self.has_vec  # a writer growing them replaces them whole
        n = min(self.n, len(live), len(has_vec))
        rows = np.flatnonzero(live[:n] & ~has_vec[:n])[:limit]
        return [self.ids[row] for row in rows.tolist()]

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
            mask &= self.tags.mask(tag, n)
        return mask

    def vector_top(
        self,
        query: Sequence[float],
        limit: int,
        mask: npt.NDArray[np.bool_],
        contextual: bool = False,
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """(id, cosine) best first among masked rows that have a vector, and with
        `contextual` the same for contextual vectors (`stores/index/vector_rank.py`)."""
        return vector_rank.top(self, query, limit, mask, contextual)

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

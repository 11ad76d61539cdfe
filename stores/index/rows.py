"""The columnar mirror for top-k: `Rows` adds to the columns of stores/index/row_columns.py
the embedder's vectors and their sign bits from a centre (`CentredRows`,
stores/index/centred_rows.py), the lists over them (stores/index/ivf.py) and every row's
contextual norm, kept as rows and vectors change.

Vectors are held as float32 while a store has no more than RESCORE of them, then as one int8
per dimension from their mean (`stores/index/held_vectors.py`: a quarter of float32's memory,
cosines within ~1e-3 of float32's). Every hit is checked against the View
(stores/index/view.py), which is the truth. The vector search over `Rows` is in
`stores/index/vector_rank.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index import ivf, vector_rank
from dreamwell.stores.index.centred_rows import CENTRE_STEP, RESCORE, CentredRows, widened
from dreamwell.stores.index.held_vectors import Held
from dreamwell.stores.index.sign_codes import sign_words
from dreamwell.stores.model import MemoryEntry, VectorLike

Matrix = npt.NDArray[np.float32]


class Rows(CentredRows):
    """The held rows with each row's contextual norm and the lists over them."""

    def __init__(
        self, capacity: int = 1024, rescore: int = RESCORE, centre_step: int = CENTRE_STEP
    ) -> None:
        super().__init__(capacity, rescore, centre_step)
        # from ivf.INDEX_AT vectors: lists over the rows (stores/index/ivf.py), and every row's
        # contextual vector's sign bits (words x rows, from the same centre)
        self.index: ivf.Index | None = None
        self.defer_index = False  # while a store's vectors load: the lists once at the end
        self.ctx_bits: npt.NDArray[np.uint64] | None = None

    def _grow(self, capacity: int) -> None:
        super()._grow(capacity)
        if self.ctx_bits is not None:
            self.ctx_bits = widened(self.ctx_bits, capacity)

    def _centred(self) -> None:
        self._index()

    def _refresh(self, row: int) -> None:
        """Recompute the contextual norms of `row` and of every row whose context holds it."""
        self._refresh_many(np.array([row], dtype=np.int64))

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
        self._hold(model, block, rows)
        index = self.index
        if index is None and self.codes is not None and self._set >= ivf.INDEX_AT:
            self._index()
        elif index is not None and index is self.index and index.plain.add(rows):
            self._index(index)  # the tail is full
        self._refresh_many(rows)

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
        self._take(model, held, rows)
        n = self.n
        for row in np.flatnonzero((self.prev[:n] >= 0) | (self.next[:n] >= 0)).tolist():
            self.ctx_norm[row] = self._ctx_norm(row)

    def drop_vector(self, entry_id: str) -> None:
        self._unheld(entry_id)
        row = self.row_of.get(entry_id)
        if row is not None:
            self.has_vec[row] = False
            self._refresh(row)

    def without_vector(self, limit: int) -> list[str]:
        """Ids of up to `limit` live rows without a vector, oldest row first: one mask over
        the columns (a loop over 100,000 rows in Python took 10 ms, after every save)."""
        live, has_vec = self.live, self.has_vec  # a writer growing them replaces them whole
        n = min(self.n, len(live), len(has_vec))
        rows = np.flatnonzero(live[:n] & ~has_vec[:n])[:limit]
        return [self.ids[row] for row in rows.tolist()]

    def sample_cosines(self, query: Sequence[float], sample: int) -> tuple[list[str], Matrix]:
        """The ids of up to `sample` live rows with a vector, spread evenly over the rows (the
        same while the store is unchanged), and the query's cosines with them: what the
        store's memories, most of them unrelated to it, score against a query."""
        vec = self.vec
        live, has_vec = self.live, self.has_vec  # a writer growing them replaces them whole
        n = min(self.n, len(live), len(has_vec))
        picked = np.arange(0, n, max(1, n // (2 * sample))) if sample > 0 else np.arange(0)
        picked = picked[live[picked] & has_vec[picked]][:sample]
        if vec is None or vec.dim != len(query) or not len(picked):
            return [], np.zeros(0, dtype=np.float32)
        ids = [self.ids[r] for r in picked.tolist()]
        return ids, vec.dot(picked, np.asarray(query, dtype=np.float32))

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


def cosines(rows: Rows, query: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
    """The query's cosines with those of `ids` that have a vector in `rows` (a hit the
    keywords found beyond the vector search's candidates)."""
    vec, has_vec = rows.vec, rows.has_vec
    if vec is None or vec.dim != len(query):
        return {}
    found = [(i, r) for i in ids if (r := rows.row_of.get(i)) is not None and has_vec[r]]
    if not found:
        return {}
    at = np.asarray([r for _, r in found], dtype=np.int64)
    got = vec.dot(at, np.asarray(query, dtype=np.float32))
    return {i: float(c) for (i, _), c in zip(found, got.tolist(), strict=True)}

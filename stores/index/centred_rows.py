"""The row columns with each row's vector as held for search and its sign bits from a
centre, the mean of the vectors held: `Rows` (stores/index/rows.py) adds the contextual
vectors and the lists over them.

The centre is taken when a store first has more than RESCORE vectors (the held rows become
int8 steps from it, for good: stores/index/held_vectors.py) and again each time the vectors
have quadrupled since. It comes from a running sum of the held vectors, and a new centre's
sign bits are computed CENTRE_STEP rows with each vector set after it, while the old centre's
serve the searches; then both are swapped in whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index.held_vectors import Held
from dreamwell.stores.index.row_columns import RowColumns
from dreamwell.stores.index.sign_codes import sign_words

Matrix = npt.NDArray[np.float32]
RESCORE = 2048  # rows given an exact cosine after the sign-bit scan
# A new centre's sign bits are computed this many rows at a time, a step with each vector
# set after it (~1.2 ms at 2,048), while the old centre's bits serve the searches: all at
# once, re-centring at 32,784 vectors held the store's lock 69 ms (the running sum aside),
# and in a server beside the backfill's embedding a save waited 186 ms for it (issue 57).
CENTRE_STEP = 2048
SUM_BLOCK = 1024  # rows widened to float64 at a time by `_summed`
BLOCK = 16_384  # rows read as float32 at a time for a sum or for sign bits


def _summed(total: npt.NDArray[np.float64], values: Matrix) -> npt.NDArray[np.float64]:
    """`total` plus each row of `values` in turn, in float64: added one row after another,
    so that the sum is the same to the bit however the rows were grouped into calls."""
    for start in range(0, len(values), SUM_BLOCK):
        chunk = values[start : start + SUM_BLOCK].astype(np.float64)
        chunk[0] += total
        # over the slow axis numpy adds row after row (its pairwise sum is for the fast axis),
        # which tests/stores/longterm/test_vector_load.py checks to the bit
        total = np.add.reduce(chunk, axis=0)
    return total


@dataclass
class _Centring:
    """A new centre whose sign bits are being computed: rows below `done` have theirs."""

    centre: Matrix
    bits: npt.NDArray[np.uint64]
    done: int = 0


def widened(bits: npt.NDArray[np.uint64], capacity: int) -> npt.NDArray[np.uint64]:
    """Sign bits (words x rows, word-major: a scan reads each word's row contiguously) with
    room for `capacity` rows."""
    out = np.zeros((bits.shape[0], capacity), dtype=np.uint64)
    out[:, : bits.shape[1]] = bits
    return out


class CentredRows(RowColumns):
    """The row columns with each row's vector (held) and its sign bits from the centre."""

    def __init__(
        self, capacity: int = 1024, rescore: int = RESCORE, centre_step: int = CENTRE_STEP
    ) -> None:
        super().__init__(capacity)
        self.rescore = rescore
        self.centre_step = centre_step
        self._set = 0  # vectors set since the matrix was made (at least the rows with one)
        self.vec: Held | None = None  # rows x dim: float32, int8 past RESCORE vectors
        # (centre, words x rows): sign bits of (vector - centre), word-major; None until the
        # store has more than RESCORE vectors. One tuple, swapped whole, so that a reader
        # always pairs bits with the centre they were made from.
        self.codes: tuple[Matrix, npt.NDArray[np.uint64]] | None = None
        self._centred_at = 0  # vectors set when the centre was last computed
        # the held vectors of the rows that have one, summed (the centre is their mean)
        self._total: npt.NDArray[np.float64] | None = None
        self._next: _Centring | None = None  # a new centre, its sign bits being computed
        self.model: str | None = None

    def _grow(self, capacity: int) -> None:
        super()._grow(capacity)
        if self.vec is not None:
            self.vec = self.vec.grown(capacity)
        if self.codes is not None:
            self.codes = (self.codes[0], widened(self.codes[1], capacity))
        if self._next is not None:
            self._next.bits = widened(self._next.bits, capacity)

    def _centred(self) -> None:
        """The centre changed (its sign bits all there) or is gone: for what is made from it."""

    def vector_count(self) -> int:
        n = self.n
        return int(np.count_nonzero(self.has_vec[:n] & self.live[:n]))  # .sum(): 8x slower

    def has_vector(self, entry_id: str) -> bool:
        row = self.row_of.get(entry_id)
        return row is not None and bool(self.has_vec[row])

    def remove(self, entry_id: str) -> None:
        self._unheld(entry_id)
        super().remove(entry_id)

    def _hold(self, model: str, block: Matrix, rows: npt.NDArray[np.int64]) -> None:
        """Hold `block` (float32) as the vectors of `rows`, in that order, as one by one: the
        centres are computed at the same counts, and their sign bits at the same steps."""
        if self.model != model or self.vec is None or self.vec.dim != block.shape[1]:
            self._emptied(model, block.shape[1])
        assert self.vec is not None
        done = 0
        while done < len(rows):
            room = self._room()
            part = rows[done : done + room]
            held = self._put(part, block[done : done + room])
            self._set += len(part)
            done += len(part)
            if self.codes is None:
                if self._set > self.rescore:
                    self._centre()
                continue
            centre, bits = self.codes
            bits[:, part] = sign_words(held - centre).T
            if self._next is not None:
                self._step(part, held)
            elif self._set >= 4 * self._centred_at:
                self._recentre()

    def _emptied(self, model: str, dim: int) -> None:
        """No vector held, for `model`'s of `dim` dimensions (a new model, or the first)."""
        self.model = model
        self.vec = Held.empty(len(self.live), dim)
        self.codes = None
        self._centred_at = 0
        self.has_vec[:] = False
        self._set = 0
        self._total = np.zeros(dim, dtype=np.float64)
        self._next = None
        self._centred()

    def _room(self) -> int:
        """How many vectors `_hold` may set before the next centring or step is due."""
        if self.codes is None:  # centred once the count passes RESCORE
            return max(self.rescore + 1 - self._set, 1)
        if self._next is not None:  # up to the vector whose step ends the new bits
            return max(-(-(self.n - self._next.done) // self.centre_step), 1)
        # and again when it reaches four times the count at the last centring
        return max(4 * self._centred_at - self._set, 1)

    def _take(self, model: str, held: Held, rows: npt.NDArray[np.int64]) -> None:
        """`held` as the vectors, `rows` being those that have one, centred at once."""
        self.model = model
        self.vec = held
        self.has_vec[:] = False
        self.has_vec[rows] = True
        self.codes = None
        self._next = None
        self._centred_at = 0
        self._set = len(rows)
        self._total = self._recount()
        if self._set > self.rescore:
            self._centre()

    def _put(self, rows: npt.NDArray[np.int64], block: Matrix) -> Matrix:
        """Hold `block` as the vectors of `rows` and give them as held (float32), keeping the
        running sum: each row's old vector out, then its new one in, one row after another."""
        assert self.vec is not None and self._total is not None
        had = self.has_vec[rows]
        old = self.vec.rows(rows[had]) if had.any() else None
        self.vec.put(rows, block)
        self.has_vec[rows] = True
        held = self.vec.rows(rows)
        if old is None:
            self._total = _summed(self._total, held)
            return held
        at = np.cumsum(1 + had) - 1  # where each row's new vector comes in the sequence
        sequence = np.empty((len(rows) + len(old), held.shape[1]), dtype=np.float32)
        sequence[at] = held
        sequence[at[had] - 1] = -old
        self._total = _summed(self._total, sequence)
        return held

    def _unheld(self, entry_id: str) -> None:
        """`entry_id`'s vector leaves the running sum (it is removed or dropped)."""
        row = self.row_of.get(entry_id)
        if row is not None and self.has_vec[row] and self.vec is not None:
            assert self._total is not None
            self._total = _summed(self._total, -self.vec.rows([row]))

    def _recount(self) -> npt.NDArray[np.float64]:
        """The running sum made afresh from the rows held."""
        assert self.vec is not None
        have = np.flatnonzero(self.has_vec[: self.n])
        total = np.zeros(self.vec.dim, dtype=np.float64)
        for start in range(0, len(have), BLOCK):  # in slices: no float32 copy of it all
            total = _summed(total, self.vec.rows(have[start : start + BLOCK]))
        return total

    def _mean(self) -> tuple[Matrix, int]:
        """The mean of the held vectors (from the running sum) and their count."""
        assert self._total is not None
        count = int(np.count_nonzero(self.has_vec[: self.n]))
        return (self._total / max(count, 1)).astype(np.float32), count

    def _fill_bits(
        self, bits: npt.NDArray[np.uint64], centre: Matrix, start: int, end: int
    ) -> None:
        """The sign bits from `centre` of rows `start` to `end` into `bits`, BLOCK rows at a
        time (no float32 copy of them all)."""
        assert self.vec is not None
        for at in range(start, end, BLOCK):
            part = slice(at, min(end, at + BLOCK))
            bits[:, part] = sign_words(self.vec.rows(part) - centre).T

    def _centre(self) -> None:
        """The centre as the mean vector and every row's sign bits from it, at once: when the
        store first has more than RESCORE vectors (when the held rows become int8 steps from
        that first centre, which then stays) and when its vectors are taken whole."""
        assert self.vec is not None
        n = self.n
        centre, count = self._mean()
        if not self.vec.quantized:
            self.vec = self.vec.to_int8(centre, n)
            self._total = self._recount()  # what is held changed
        bits = np.zeros((-(-self.vec.dim // 64), len(self.live)), dtype=np.uint64)
        self._fill_bits(bits, centre, 0, n)
        self.codes = (centre, bits)
        self._next = None
        self._centred_at = self._set = count
        self._centred()

    def _recentre(self) -> None:
        """The vectors quadrupled since the centre was computed: a new one from the running
        sum, whose sign bits `_step` computes a step with each vector set after this one
        (the old centre and its bits serve the searches meanwhile)."""
        assert self.codes is not None
        centre, count = self._mean()
        self._next = _Centring(centre, np.zeros_like(self.codes[1]))
        self._centred_at = self._set = count

    def _step(self, rows: npt.NDArray[np.int64], held: Matrix) -> None:
        """`rows` were just set (held as `held`) while a new centre's bits are computed: those
        of them already passed get the new centre's bits, then the bits go on a step per
        vector; done, the new centre and bits replace the old (swapped whole)."""
        step = self._next
        assert step is not None
        passed = rows < step.done
        step.bits[:, rows[passed]] = sign_words(held[passed] - step.centre).T
        end = min(self.n, step.done + len(rows) * self.centre_step)
        self._fill_bits(step.bits, step.centre, step.done, end)
        step.done = end
        if end >= self.n:
            self.codes = (step.centre, step.bits)
            self._next = None
            self._centred()

"""An inverted file over the rows' sign bits, for stores too large to scan every row.

Below INDEX_AT vectors a search scans every allowed row's sign bits
(`stores/index/vector_rank.py`): at a million rows that took 37-47 ms of a search with the
contextual ranking. From INDEX_AT on, the rows are also grouped into COARSE x FINE lists
(leaves) by a two-level k-means quantiser (a row is assigned with 64 dot products, not
1,024), once by their vector and once by their contextual vector, each with its own
quantiser: a memory's context (its vector and its neighbours' summed) lies elsewhere than
its own vector. Each list keeps its rows' sign bits contiguous, in list order. A search
ranks the leaves by its query, scans the sign bits of the nearest leaves holding a share of
the rows (PLAIN_SHARE, CONTEXT_SHARE) and of the tail (rows whose vector or context changed
since the lists were made: their current bits), and gives an exact cosine to the best of
them, as below INDEX_AT. Rows deleted since stay in their list and are dropped by the
search's mask; a filter allowing a quarter of the rows or fewer scans its own rows instead.

`Lists` is made whole and never changed but for its tail, which only grows (a reader reads
the count, then the rows below it). When a tail is full the rows' owner assigns the tail's
rows to leaves and makes new lists with the same quantisers (at 300,000 rows, 165 ms of the
save that filled it, once every ~10,000); when the centre of the sign bits moves (the
vectors quadrupled) it trains new ones. A store's vectors are listed once, after loading.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index.sign_codes import best, similarity

Matrix = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int64]
Bits = npt.NDArray[np.uint64]

# From INDEX_AT vectors searches probe the lists. Measured with tests/bench/million_bench.py
# --stage rows (real LoCoMo e5 vectors, two texts a memory, streams of ten; recall@10 against
# the exact scan, plain / contextual): at 1,000,000 the lists gave 0.978 / 0.964 in 17.8 ms,
# every row's sign bits 1.000 / 0.984 in 37-47 ms; at 500,000 0.967 / 0.936 in 9.1 ms against
# 0.999 / 0.965 in 17.8; at 200,000 (with a 16th probed) 0.931 / 0.928 in 4.1 ms against
# 0.997 / 0.933 in 6.6. Below a few hundred thousand rows the scan is fast and loses less.
INDEX_AT = 500_000
COARSE = 32
FINE = 32  # leaves per coarse cell (with sqrt(rows) leaves, recall@10 at 200,000 fell .93 -> .90)
SAMPLE = 65_536  # vectors the quantiser is trained on
ROUNDS = 8  # k-means iterations per level
# a search scans the sign bits of the nearest leaves holding a 10th of the rows (a 16th lost
# 0.02-0.03 of recall@10) and gives an exact cosine to a 16th of those; in the contextual lists
# an 8th and a 32nd (each contextual candidate also needs its neighbours' cosines)
PLAIN_SHARE = (10, 16)
CONTEXT_SHARE = (8, 32)
BLOCK = 16_384  # rows assigned at a time (a float32 copy of the block, not of every row)


def nearest(x: Matrix, centres: Matrix) -> npt.NDArray[np.int32]:
    """Per row of `x`, the closest of `centres` by Euclidean distance."""
    bias = 0.5 * np.einsum("ij,ij->i", centres, centres)
    out: npt.NDArray[np.int32] = np.argmax(x @ centres.T - bias, axis=1).astype(np.int32)
    return out


def kmeans(x: Matrix, k: int, rng: np.random.Generator, rounds: int = ROUNDS) -> Matrix:
    """`k` centres of the rows of `x` by Lloyd's iterations from `k` random rows (rows are
    repeated when there are fewer than `k`; a centre left with no row keeps its place)."""
    centres = x[rng.choice(len(x), k, replace=len(x) < k)].copy()
    for _ in range(rounds):
        near = nearest(x, centres)
        counts = np.bincount(near, minlength=k)
        # each centre's sum as a one-hot product: np.add.at took 10x as long (65,536 rows into
        # 32 centres: 331 ms a round against 34), most of the time the lists are trained in
        onehot = np.zeros((k, len(x)), dtype=x.dtype)
        onehot[near, np.arange(len(x))] = 1
        sums = onehot @ x
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
    return centres


@dataclass(frozen=True)
class Quantiser:
    coarse: Matrix  # COARSE x dim
    leaves: Matrix  # (COARSE x fine) x dim: `fine` leaves per coarse cell, cell by cell

    @property
    def fine(self) -> int:
        return len(self.leaves) // len(self.coarse)

    @staticmethod
    def train(sample: Matrix, seed: int = 0) -> Quantiser:
        rng = np.random.default_rng(seed)
        coarse = kmeans(sample, COARSE, rng)
        cell = nearest(sample, coarse)
        leaves = np.empty((COARSE * FINE, sample.shape[1]), dtype=np.float32)
        for c in range(COARSE):
            members = sample[cell == c]
            if len(members) == 0:
                members = coarse[c : c + 1]
            leaves[c * FINE : (c + 1) * FINE] = kmeans(members, FINE, rng)
        return Quantiser(coarse, leaves)

    def assign(self, x: Matrix) -> npt.NDArray[np.int32]:
        """The leaf of each row: its nearest coarse cell, then that cell's nearest leaf."""
        cell = nearest(x, self.coarse)
        out = np.empty(len(x), dtype=np.int32)
        for c in np.unique(cell).tolist():
            members = np.flatnonzero(cell == c)
            leaves = self.leaves[c * self.fine : (c + 1) * self.fine]
            out[members] = c * self.fine + nearest(x[members], leaves)
        return out

    @functools.cached_property
    def _bias(self) -> Matrix:
        """Half each leaf's squared norm (its distance to a query is ranked by q·leaf - this)."""
        bias: Matrix = 0.5 * np.einsum("ij,ij->i", self.leaves, self.leaves)
        return bias

    def ranked(self, q: Matrix) -> Ints:
        """Every leaf, nearest to `q` first."""
        return np.argsort(self._bias - self.leaves @ q).astype(np.int64)


class Lists:
    """Rows grouped by leaf (`rows[starts[l]:starts[l + 1]]` are leaf l's) with their sign
    bits in the same order, and the tail: rows whose vector changed since (their bits are
    read from the owner's columns, which are current)."""

    def __init__(
        self, quantiser: Quantiser, rows: Ints, leaf: npt.NDArray[np.int32], bits: Bits
    ) -> None:
        """Lists of `rows`, in leaves `leaf`, with sign bits `bits` (words x rows, in the
        order of `rows`)."""
        self.quantiser = quantiser
        order = np.argsort(leaf.astype(np.uint16), kind="stable")  # a radix sort: 8 ms, not 63
        self.rows: Ints = rows[order]
        self.leaf: npt.NDArray[np.int32] = leaf[order]
        self.bits: Bits = np.ascontiguousarray(bits[:, order])
        self.sizes = np.bincount(leaf, minlength=len(quantiser.leaves))
        self.starts: Ints = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.span = int(rows.max(initial=-1)) + 1  # the rows listed are below this
        self.room = max(1024, len(rows) // 32)  # tail rows before new lists are made
        self.tail: Ints = np.empty(self.room, dtype=np.int64)
        self.tail_n = 0

    def add(self, rows: Ints) -> bool:
        """Put `rows` in the tail (one writer at a time); True when the tail is full (it
        grows past `room`: the owner is to make new lists)."""
        end = self.tail_n + len(rows)
        if end > len(self.tail):  # a new array holding the old rows: readers keep theirs
            grown = np.empty(max(2 * len(self.tail), end), dtype=np.int64)
            grown[: self.tail_n] = self.tail[: self.tail_n]
            grown[self.tail_n : end] = rows
            self.tail = grown
        else:
            self.tail[self.tail_n : end] = rows
        self.tail_n = end  # after the rows: a reader that sees the count sees them
        return end >= self.room

    @property
    def filling(self) -> bool:
        """Whether the tail is half full or more (due to be listed with the other set)."""
        return 2 * self.tail_n >= self.room

    def kept(self, rows: Ints) -> npt.NDArray[np.bool_]:
        """Per position in the lists, whether its row is among `rows` (sorted) and not in
        the tail: its leaf and bits still hold."""
        n = max(int(rows[-1]) + 1 if len(rows) else 0, int(self.rows.max(initial=-1)) + 1)
        wanted = np.zeros(n, dtype=bool)
        wanted[rows] = True
        wanted[self.tail[: self.tail_n]] = False
        out: npt.NDArray[np.bool_] = wanted[self.rows]
        return out

    def best(
        self,
        q: Matrix,
        share: tuple[int, int],
        query: Bits,
        current: Bits,
        allowed: npt.NDArray[np.bool_],
        count: int,
        least: int,
    ) -> Ints:
        """The allowed rows (`count` of them) among the leaves nearest `q` that hold a
        `share[0]`-th of the rows (more under a filter, so that as many allowed rows are
        probed) and the tail, the best `share[1]`-th of those (at least `least`) by agreeing
        signs, sorted, once each. `current` holds every row's bits as they are now (for the
        tail)."""
        n = len(allowed)
        want = len(self.rows) * n // (share[0] * max(count, 1))
        ranked = self.quantiser.ranked(q)
        tail = self.tail[: self.tail_n]
        tail = tail[tail < n]
        enough = int(np.searchsorted(np.cumsum(self.sizes[ranked]), want)) + 1
        chosen = ranked[:enough]
        # the chosen leaves' runs, nearest first (rows tied at the cut below go to the nearer
        # leaves), copied as slices: a gather of their positions took 1.2-1.6 ms at a million
        # rows, the slices 0.45
        runs = list(
            zip(self.starts[chosen].tolist(), self.starts[chosen + 1].tolist(), strict=True)
        )
        rows = np.concatenate([*(self.rows[a:b] for a, b in runs), tail])
        listed = np.concatenate([self.bits[:, a:b] for a, b in runs], axis=1)
        close = np.concatenate([similarity(listed, query), similarity(current[:, tail], query)])
        if count < n or self.span > n:  # some rows are not allowed (or are past the mask)
            if self.span > n:
                ok = rows < n
                ok[ok] = allowed[rows[ok]]
            else:
                ok = allowed[rows]
            rows, close = rows[ok], close[ok]
        pick = best(close, max(least, len(rows) // share[1]), 64 * len(query))
        picked = np.sort(rows[pick])  # once each (a row may be listed and in the tail)
        first = np.ones(len(picked), dtype=bool)
        first[1:] = picked[1:] != picked[:-1]
        once: Ints = picked[first]
        return once  # np.unique hashes: 0.84 ms for 8,000 rows against 0.25


@dataclass(frozen=True)
class Index:
    """The lists over a store's vectors and over its contextual vectors, each with its own
    quantiser, made with the sign bits of one centre (a search uses them only with that
    centre's bits)."""

    centre: Matrix
    plain: Lists
    context: Lists


def train(rows: Ints, vectors: Callable[[Ints], Matrix]) -> Quantiser:
    rng = np.random.default_rng(len(rows))
    sample = np.sort(rng.choice(rows, min(SAMPLE, len(rows)), replace=False))
    return Quantiser.train(vectors(sample))


def listed(
    quantiser: Quantiser,
    rows: Ints,
    vectors: Callable[[Ints], Matrix],
    bits: Bits,
    previous: Lists | None = None,
) -> Lists:
    """Lists of `rows` (sorted; `vectors(rows)` gives theirs as float32, `bits` every row's
    sign bits). With `previous` (made with the same quantiser and centre) the rows it holds
    outside its tail keep their leaf and their bits, copied in list order (a gather of
    scattered columns at a million rows took 100 ms); only the others are assigned."""
    if previous is None:
        old_rows = np.empty(0, dtype=np.int64)
        old_leaf = np.empty(0, dtype=np.int32)
        old_bits = np.empty((bits.shape[0], 0), dtype=np.uint64)
        todo = rows
    else:
        keep = previous.kept(rows)
        old_rows, old_leaf = previous.rows[keep], previous.leaf[keep]
        old_bits = previous.bits[:, keep]
        placed = np.zeros(int(rows[-1]) + 1 if len(rows) else 0, dtype=bool)
        placed[old_rows] = True  # kept rows are among `rows`
        todo = rows[~placed[rows]]
    leaf = np.empty(len(todo), dtype=np.int32)
    for start in range(0, len(todo), BLOCK):
        block = todo[start : start + BLOCK]
        leaf[start : start + len(block)] = quantiser.assign(vectors(block))
    return Lists(
        quantiser,
        np.concatenate([old_rows, todo]),
        np.concatenate([old_leaf, leaf]),
        np.concatenate([old_bits, bits[:, todo]], axis=1),
    )

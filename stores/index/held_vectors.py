"""The vectors as a process holds them for search: exact float32 rows while a store has few,
then one int8 per dimension.

A row is held as the int8 rounding of its difference from a centre, scaled per row (its
largest component maps to 127), plus that scale: 388 bytes for 384 dimensions, against 768
as bfloat16 (37 MiB less at 100,000 memories). Centring is what makes a byte enough:
sentence embeddings share a large common component, which without it takes most of each
row's range. On 2,500 LoCoMo turns and 400 of its questions embedded by e5, recall@10 of the
held vectors against float32 was 0.991 centred (largest cosine error 8.5e-4), 0.980 uncentred
(1.7e-3), and 0.991 as bfloat16 (6.0e-4).

The centre is the mean of the rows held when a store first has more than `Rows.rescore`
vectors (until then every search rescores every row, so small stores stay exact) and is
never moved afterwards: moving it would round every row a second time. A store's rows keep
the centre when they are rebuilt (`Rows.compacted`), for the same reason.

The stored vectors (the log and LanceDB) are float32 and untouched: what is held here is a
cache for ranking, rebuilt from them at every start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Index = npt.NDArray[np.int64] | slice | list[int]
DOT_BLOCK = 1024  # rows read and widened at a time by `dot`


def quantize(block: Matrix, centre: Matrix) -> tuple[npt.NDArray[np.int8], Matrix]:
    """Rows of `block` as int8 steps of a per-row scale from `centre`, and the scales."""
    residual = np.asarray(block, dtype=np.float32) - centre
    top = np.abs(residual).max(axis=1) if residual.size else np.zeros(len(residual))
    scale = np.where(top > 0, top / 127, 1).astype(np.float32)
    steps = np.rint(residual / scale[:, None])
    return np.clip(steps, -127, 127).astype(np.int8), scale


@dataclass(frozen=True)
class Held:
    """Rows x dim, float32 (`scale` None) or int8 steps from `centre`. Swapped whole when it
    grows or changes form, so that a reader always pairs steps with their scale and centre;
    rows are changed in place (one writer at a time)."""

    matrix: npt.NDArray[Any]
    scale: Matrix | None = None
    centre: Matrix | None = None

    @staticmethod
    def empty(capacity: int, dim: int, centre: Matrix | None = None) -> Held:
        """No rows yet: float32, or with `centre` int8 steps from it."""
        # zeros come from calloc: the kernel maps the capacity's pages when they are written
        if centre is None:
            return Held(np.zeros((capacity, dim), dtype=np.float32))
        return Held(
            np.zeros((capacity, dim), dtype=np.int8),
            np.ones(capacity, dtype=np.float32),
            np.asarray(centre, dtype=np.float32),
        )

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + (0 if self.scale is None else self.scale.nbytes))

    def rows(self, rows: Index) -> Matrix:
        """The rows as float32 (a new array)."""
        if self.scale is None:
            return np.array(self.matrix[rows], dtype=np.float32)
        assert self.centre is not None
        out = self.matrix[rows].astype(np.float32)
        out *= self.scale[rows][:, None]
        out += self.centre
        return out

    def dot(self, rows: Index, query: Matrix) -> Matrix:
        """The rows' dot products with `query`, without widening them and the centre apart.
        An array of rows is read DOT_BLOCK at a time into buffers that stay in cache (17,900
        rows of a million: 5.9 ms as one gather and widening, 3.3 in blocks)."""
        if not isinstance(rows, np.ndarray):
            rows = np.arange(len(self.matrix))[rows]
        out = np.empty(len(rows), dtype=np.float32)
        block = np.empty((min(DOT_BLOCK, len(rows)), self.dim), dtype=self.matrix.dtype)
        wide = block if self.scale is None else np.empty(block.shape, dtype=np.float32)
        for start in range(0, len(rows), DOT_BLOCK):
            part = rows[start : start + DOT_BLOCK]
            k = len(part)
            np.take(self.matrix, part, axis=0, out=block[:k])
            if wide is not block:
                wide[:k] = block[:k]
            np.matmul(wide[:k], query, out=out[start : start + k])
        if self.scale is not None:
            assert self.centre is not None
            out *= self.scale[rows]
            out += np.float32(self.centre @ query)
        return out

    def put(self, rows: Index, block: Matrix) -> None:
        """Set `rows` from float32 `block`, in place."""
        if self.scale is None:
            self.matrix[rows] = block
            return
        assert self.centre is not None
        steps, scale = quantize(block, self.centre)
        self.matrix[rows] = steps
        self.scale[rows] = scale

    def grown(self, capacity: int) -> Held:
        held = slice(0, len(self.matrix))
        return self.taken(capacity, held, held)

    def to_int8(self, centre: Matrix, filled: int) -> Held:
        """This float32 matrix held as int8 steps from `centre` (rows from `filled` on are
        empty), in slices: no second float32 copy of it all."""
        assert self.scale is None
        out = Held.empty(len(self.matrix), self.dim, centre)
        for start in range(0, filled, 16384):
            part = slice(start, min(filled, start + 16384))
            out.put(part, self.matrix[part])
        return out

    def taken(self, capacity: int, rows: Index, to: Index) -> Held:
        """A new Held of `capacity` rows holding this one's `rows` at `to`, as they are."""
        out = Held.empty(capacity, self.dim, self.centre)
        out.matrix[to] = self.matrix[rows]
        if self.scale is not None:
            assert out.scale is not None
            out.scale[to] = self.scale[rows]
        return out

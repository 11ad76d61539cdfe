"""How a search ranks `Rows` by vector: the sign-bit scan or the lists, exact cosines for the
best of them, and the contextual sums.

The vector search has two stages. Each vector is held as above and, once there are more
than RESCORE, also as the sign bits of its difference from the mean vector (48 bytes for
384 dimensions, stored word-major so that the scan runs over contiguous words). Centring
matters: sentence embeddings share a large common component, and raw signs of e5 vectors
lost up to a third of the true top 50. A search first ranks every allowed row by agreeing
signs, reading a thirtieth of the bytes a float32 scan reads (which is what bounds the scan
on a laptop), then computes exact cosines for the best of them (and their contextual
neighbours). With no more than RESCORE allowed rows every row is rescored, so small stores
and narrow filters are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index import ivf
from dreamwell.stores.index.sign_codes import best as best_signs
from dreamwell.stores.index.sign_codes import sign_words, similarity

if TYPE_CHECKING:
    from dreamwell.stores.index.rows import Rows

Matrix = npt.NDArray[np.float32]


def top(
    columns: Rows,
    query: Sequence[float],
    limit: int,
    mask: npt.NDArray[np.bool_],
    contextual: bool = False,
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(id, cosine) best first among masked rows that have a vector (unit vectors), and
    with `contextual` the same for contextual vectors: each row's vector summed with the
    vectors of the rows up to RADIUS links before and after it, normalised (a row with
    no neighbours is its own context). Candidates come from the sign-bit scan; scores
    are exact cosines."""
    vec, codes = columns.vec, columns.codes
    n = min(len(mask), columns.n)
    if vec is None or n == 0 or vec.dim != len(query):
        return [], []
    q = np.asarray(query, dtype=np.float32)
    allowed = mask[:n] & columns.has_vec[:n]
    count = int(np.count_nonzero(allowed))
    k = min(limit, count)
    if k <= 0:
        return [], []
    contextual = contextual and columns.linked > 0
    # the link columns (-1: none), and arrays sized past every row they can name with a
    # trailing 0/False slot that index -1 reads, so "no neighbour" adds nothing unbranched
    hops, named = columns.links(n) if contextual else ([], n)
    size = max(n, named) + 1
    usable = np.zeros(size, dtype=bool)
    usable[:n] = columns.has_vec[:n] & columns.live[:n]
    index, ctx_bits = columns.index, columns.ctx_bits
    # the lists: with a vector index of this centre, unless a filter allows a quarter of
    # the rows or fewer (scanning their own bits reads less than probing)
    listed = index is not None and codes is not None and index.centre is codes[0]
    if count <= columns.rescore or codes is None:
        plain_rows = context_rows = np.flatnonzero(allowed)
    elif listed and ctx_bits is not None and count > n // 4:
        assert index is not None
        plain_rows, context_rows = _probed(columns, index, codes[1], ctx_bits, q, allowed, count)
    else:
        plain_rows, context_rows = _candidates(columns, codes, q, allowed, count, usable, hops)
    scores = np.zeros(size, dtype=np.float32)
    needed = plain_rows
    if contextual:
        needed = _with_linked(context_rows, hops, n, also=plain_rows)
    scores[needed] = vec.dot(needed, q)
    plain = _top(columns, plain_rows, scores[plain_rows], k)
    if not contextual:
        return plain, []
    scores[needed[~usable[needed]]] = 0  # a deleted or vectorless neighbour adds nothing
    summed = _summed(scores, scores, context_rows, hops)
    return plain, _top(columns, context_rows, summed / columns.ctx_norm[context_rows], k)


def _candidates(
    columns: Rows,
    codes: tuple[Matrix, npt.NDArray[np.uint64]],
    q: Matrix,
    allowed: npt.NDArray[np.bool_],
    count: int,
    usable: npt.NDArray[np.bool_],
    hops: list[npt.NDArray[np.int64]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The rows to rescore for the plain and the contextual ranking, by sign agreement.
    The pools grow with the allowed rows (a fixed share keeps recall as N grows). A
    narrow filter scans only its rows (and their neighbours), not the whole store."""
    centre, bits = codes
    n = len(allowed)
    words = sign_words(q[None, :] - centre)[0]
    bound = 64 * len(words)
    whole = count == n  # every row allowed: slices, not index arrays
    rows = np.flatnonzero(allowed) if not whole else None
    pick: slice | npt.NDArray[np.int64] = slice(0, n) if rows is None else rows
    if count > n // 4:
        close = similarity(bits[:, :n], words)
    else:
        assert rows is not None
        scan = _with_linked(rows, hops, n)
        close = np.zeros(n, dtype=np.int16)
        close[scan] = similarity(bits[:, scan], words)
    plain = best_signs(close[pick], max(columns.rescore, count // 64), bound)
    plain = plain if rows is None else rows[plain]
    if not hops:
        return plain, plain
    near = np.zeros(len(usable), dtype=np.int16)  # index -1 (no neighbour) reads the last 0
    np.copyto(near[:n], close, where=usable[:n])
    around = _summed(close, near, pick, hops) / columns.ctx_norm[pick]
    best = _best(around, _context_pool(columns.rescore, count))
    return plain, best if rows is None else rows[best]


def _probed(
    columns: Rows,
    index: ivf.Index,
    bits: npt.NDArray[np.uint64],
    ctx_bits: npt.NDArray[np.uint64],
    q: Matrix,
    allowed: npt.NDArray[np.bool_],
    count: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The rows to rescore for the plain and the contextual ranking, from the lists: the
    leaves nearest the query, and the rows changed since (stores/index/ivf.py)."""
    words = sign_words(q[None, :] - index.centre)[0]
    least = columns.rescore
    plain = index.plain.best(q, ivf.PLAIN_SHARE, words, bits, allowed, count, least)
    context = index.context.best(q, ivf.CONTEXT_SHARE, words, ctx_bits, allowed, count, least // 4)
    return plain, context


def _context_pool(rescore: int, count: int) -> int:
    """How many rows the sign scan's contextual ranking rescores: a quarter of the plain
    pool's share (each also needs its neighbours' cosines), and at least half of RESCORE.
    With a quarter of RESCORE (512) the contextual recall@10 against an exact scan at
    100,000 memories was 0.919 (0.968 with 1,024, 0.987 with 2,048; million_bench.py
    --stage rows --n 100000), against 0.964 at a million, where the share gives 3,906. (The
    lists, from 500,000 rows, take their own share: stores/index/ivf.py.)"""
    return max(rescore // 2, count // 256)


def _with_linked(
    rows: npt.NDArray[np.int64],
    hops: list[npt.NDArray[np.int64]],
    n: int,
    also: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """`rows` (and `also`: rows below `n`) and the rows below `n` linked to `rows`,
    sorted, once each: marked in a mask of `n` rows (at 100,000 rows, 0.02 ms where the
    two np.union1d calls of every search took 0.41)."""
    if not hops and also is None:
        return rows
    mark = np.zeros(n, dtype=bool)
    mark[rows] = True
    if also is not None:
        mark[also] = True
    for hop in hops:
        linked = hop[rows]
        mark[linked[(linked >= 0) & (linked < n)]] = True
    return np.flatnonzero(mark)


def _summed(
    own: npt.NDArray[Any],
    near: npt.NDArray[Any],
    rows: slice | npt.NDArray[np.int64],
    hops: list[npt.NDArray[np.int64]],
) -> npt.NDArray[Any]:
    """Per row of `rows`: its own value plus its neighbours' (`near` is 0 for rows that do
    not count and has a trailing 0 that index -1, no neighbour, reads)."""
    return own[rows] + sum(near[hop[rows]] for hop in hops)


def _best(values: npt.NDArray[Any], k: int) -> npt.NDArray[np.int64]:
    """Indices of the k largest values (not negated: an integer minimum would overflow)."""
    cut = len(values) - k
    return np.argpartition(values, cut)[cut:]


def _top(
    columns: Rows, rows: npt.NDArray[np.int64], scores: npt.NDArray[Any], k: int
) -> list[tuple[str, float]]:
    """The k best of `rows` by `scores` (one score per row), best first."""
    k = min(k, len(rows))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    ids = columns.ids  # plain ints and floats: 35 against 54 us for 100 hits as numpy scalars
    return [(ids[r], s) for r, s in zip(rows[top].tolist(), scores[top].tolist(), strict=True)]

"""A store's vectors are loaded from LanceDB a block at a time, with no object per vector (a
dict of 100,000 of them took 145 MB for a moment and left the heap 15 MB larger): the rows
come out exactly as setting the vectors one by one made them (the same centre, sign bits and
contextual norms), so every search answers as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.index.rows import Rows
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow
from tests.support.embedders import HashEmbedder


def _rows_state(rows: Rows) -> list[np.ndarray]:
    n = rows.n
    assert rows.vec is not None and rows.codes is not None
    held = rows.vec
    assert held.scale is not None and held.centre is not None  # int8 past `rescore`
    return [
        *(held.matrix[:n], held.scale[:n], held.centre),
        *(rows.has_vec[:n], rows.ctx_norm[:n], rows.codes[0], rows.codes[1][:, :n]),
    ]


@pytest.mark.parametrize("step", [None, 8])  # 8: each new centre's bits over ~90 vectors
def test_vectors_set_in_blocks_make_the_rows_that_setting_them_one_by_one_makes(
    step: int | None,
) -> None:
    rng = np.random.default_rng(3)
    now = utcnow()
    entries = [
        MemoryEntry(f"m{i}", "x", None, (), now, now, now,
                    metadata={FOLLOWS: f"m{i - 1}"} if i % 7 else {})
        for i in range(700)
    ]  # fmt: skip
    vectors = rng.standard_normal((700, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    order = rng.permutation(700)
    more = {} if step is None else {"centre_step": step}
    one, blocks = Rows(rescore=20, **more), Rows(rescore=20, **more)  # centred at 21, 84, 336
    for rows in (one, blocks):
        for e in entries:
            rows.put(e)
    one.set_vector("m5", "hash", vectors[5])  # one set before the load, in both
    blocks.set_vector("m5", "hash", vectors[5])
    for i in order.tolist():
        one.set_vector(f"m{i}", "hash", vectors[i])
    for start in range(0, 700, 64):
        part = order[start : start + 64]
        blocks.set_vectors("hash", vectors[part], part.astype(np.int64))
    for a, b in zip(_rows_state(one), _rows_state(blocks), strict=True):
        assert np.array_equal(a, b)
    q = vectors[17] + 0.1 * vectors[3]
    mask = one.mask(None, ())
    assert one.vector_top(list(q), 10, mask, True) == blocks.vector_top(list(q), 10, mask, True)


def test_a_reopened_store_loads_the_vectors_the_old_way_loaded(tmp_path: Path) -> None:
    embedder = HashEmbedder()  # word-bag vectors: the rule would judge them, not the load
    store = LongTermStore(tmp_path, embedder=embedder, relevance=None)
    for i in range(300):
        store.save(f"harbour log entry {i} about tides and gulls", caller="c")
    store.backfill(batch=400)
    store.checkpoint()
    fresh = LongTermStore(tmp_path, embedder=embedder, relevance=None)
    fresh.load_vectors()
    old = LongTermStore(tmp_path, embedder=embedder, relevance=None)
    m = old._parts.mirror
    with m.lock:
        m.adopt(old._parts.table.vectors(embedder.name))  # the way of one object per vector
        m.vectors_ready = True
    a, b = fresh._parts.mirror.rows, m.rows
    n = a.n
    assert a.vector_count() == 300 and b.n == n
    assert a.vec is not None and b.vec is not None
    assert np.array_equal(a.vec.rows(slice(0, n)), b.vec.rows(slice(0, n)))
    assert np.array_equal(a.ctx_norm[:n], b.ctx_norm[:n])
    for query in ("gulls over the tides", "harbour entry 42"):
        got = [(h.entry.id, h.score) for h in fresh.search(query, limit=10)]
        assert got and got == [(h.entry.id, h.score) for h in old.search(query, limit=10)]

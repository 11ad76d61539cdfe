"""Vectors shaped like sentence embeddings of a store's memories, and rows holding them."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dreamwell.stores.index.rows import Rows
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow

RESCORE = 256  # candidates rescored: 3 % of the 8,192 rows below, as 2,048 is of 65,536


DIM = 384  # the embedded model's dimension: sign bits are coarser with fewer


SHARED = 3.0 * np.random.default_rng(0).normal(size=DIM)


TOPICS = np.random.default_rng(1).normal(size=(50, DIM))


def unit(vectors: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    return (vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int) -> npt.NDArray[np.float32]:
    """Unit vectors around 50 topics plus a large component they all share, like sentence
    embeddings of a store's memories (mean pairwise cosine 0.82, as with e5)."""
    rng = np.random.default_rng(seed)
    return unit(SHARED + TOPICS[rng.integers(0, 50, n)] + rng.normal(size=(n, DIM)))


def build(vectors: npt.NDArray[np.float32], stream: int = 0) -> Rows:
    """Rows holding `vectors`, with `stream`: in streams of that many, each memory linked
    to the one before it."""
    rows = Rows(len(vectors) + 1, rescore=RESCORE)
    now = utcnow()
    for i, v in enumerate(vectors):
        meta = {FOLLOWS: f"m{i - 1}"} if stream and i % stream else {}
        entry = MemoryEntry(f"m{i}", "x", f"c/{i % 4}", (), now, now, now, metadata=meta)
        rows.put(entry)
        rows.set_vector(entry.id, "test", v)
    return rows

"""The store's vector search at growing N (not collected by pytest): its latency beside the
raw limit of this machine, and how close its answers are to an exact scan.

Times `Rows.vector_top` (sign-bit scan over every allowed row, exact rescoring of the best
RESCORE, contextual scores) against a bare float32 `matrix @ query` + argpartition in the
same run, one BLAS thread as the server runs. The vectors are clustered like sentence
embeddings (50 topics plus a large shared component: mean pairwise cosine ~0.8, as with e5);
each query is a topic plus noise, not a copy of a stored vector. Half of the rows follow the
row before them (contextual links). Recall@k is the share of the exact top k (float32 scan)
that the store returns in its top k; recall@10 is also given against an exact scan of the
vectors as the store holds them (int8 steps), which separates what the sign-bit stage loses from
what rounding to int8 reorders (near-ties closer than ~1e-3).

With --vectors FILE.npy (for instance real e5 embeddings) the rows are those vectors, and the
queries are stored vectors with noise added.

Run: python tests/bench/vector_scan_bench.py [--sizes 10000,100000,300000,1000000]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `dreamwell` sets it (server/cli/main.py)

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scale_bench import pct

from dreamwell.stores.index.rows import Rows
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow

DIM = 384


def unit(v: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def data(n: int, searches: int, given: Path | None) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    rng = np.random.default_rng(n)
    if given is not None:
        base = np.load(given).astype(np.float32)
        vectors = base[rng.integers(0, len(base), n)]
        vectors = unit(vectors + 0.02 * rng.normal(size=vectors.shape))
        picked = vectors[rng.integers(0, n, searches)]
        return vectors, unit(picked + 0.04 * rng.normal(size=picked.shape))
    shared = 3.0 * rng.normal(size=DIM)
    topics = rng.normal(size=(50, DIM))
    vectors = unit(shared + topics[rng.integers(0, 50, n)] + rng.normal(size=(n, DIM)))
    asked = topics[rng.integers(0, 50, searches)]
    return vectors, unit(shared + asked + 2 * rng.normal(size=(searches, DIM)))


def bench(n: int, searches: int, given: Path | None) -> None:
    vectors, queries = data(n, searches, given)
    rows = Rows(n + 1)
    now = utcnow()
    started = time.perf_counter()
    for i in range(n):
        meta = {FOLLOWS: f"m{i - 1}"} if i % 2 else {}
        rows.put(MemoryEntry(f"m{i}", "", f"c/{i % 50}", (), now, now, now, metadata=meta))
        rows.set_vector(f"m{i}", "bench", vectors[i])
    build = time.perf_counter() - started
    everything = rows.mask(None, ())
    one_category = rows.mask("c/7", ())
    timings: dict[str, list[float]] = {"raw": [], "store": [], "store+ctx": [], "filtered": []}
    recall: dict[int, list[float]] = {10: [], 100: []}
    held_recall: list[float] = []  # against an exact scan of the vectors as held (int8)
    assert rows.vec is not None
    as_held = rows.vec.rows(slice(0, n))
    for q in queries:
        t = time.perf_counter()
        scores = vectors @ q
        best = np.argpartition(-scores, 99)[:100]
        timings["raw"].append(time.perf_counter() - t)
        t = time.perf_counter()
        plain, _ = rows.vector_top(list(q), 100, everything)
        timings["store"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rows.vector_top(list(q), 100, everything, contextual=True)
        timings["store+ctx"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rows.vector_top(list(q), 100, one_category, contextual=True)
        timings["filtered"].append(time.perf_counter() - t)
        truth = [f"m{i}" for i in best[np.argsort(-scores[best])]]
        for k, got in recall.items():
            got.append(len({i for i, _ in plain[:k]} & set(truth[:k])) / k)
        exact_held = np.argsort(-(as_held @ q))[:10]
        held_recall.append(len({i for i, _ in plain[:10]} & {f"m{i}" for i in exact_held}) / 10)
    cells = "  ".join(
        f"{name} {statistics.median(v) * 1000:6.2f}/{pct(v, 0.95) * 1000:6.2f}"
        for name, v in timings.items()
    )
    held = (rows.vec.nbytes if rows.vec is not None else 0) + (
        rows.codes[1].nbytes if rows.codes is not None else 0
    )
    sys.stdout.write(
        f"N={n:>9,}  p50/p95 ms: {cells}  recall@10 {np.mean(recall[10]):.3f} "
        f"@100 {np.mean(recall[100]):.3f} (@10 against the held int8 "
        f"{np.mean(held_recall):.3f})  held {held / 2**20:.0f} MiB "
        f"(float32 {vectors.nbytes / 2**20:.0f})  built in {build:.1f} s  "
        f"load {os.getloadavg()[0]:.2f}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,300000,1000000")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--vectors", type=Path, help="a .npy matrix of real embeddings")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        bench(n, args.searches, args.vectors)


if __name__ == "__main__":
    main()

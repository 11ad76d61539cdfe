"""The exact in-memory vector scan at growing N (not collected by pytest): where it stops
meeting the search target, and how it compares with the raw numpy limit on this machine.

Times `Rows.vector_top` (the store's scan: one matrix-vector product over the contiguous
matrix, the filter mask, top-k, and the contextual scores from the same product) against a
bare `matrix @ query` + argpartition in the same run, one BLAS thread as the server runs.
Vectors are random unit vectors (the scan's cost does not depend on their values); half of
the rows follow the row before them (contextual links).

Run: python tests/bench/vector_scan_bench.py [--sizes 10000,100000,300000,1000000]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `dreamwell` sets it (server/cli.py)

import argparse
import statistics
import sys
import time

import numpy as np

from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow
from dreamwell.stores.view import Rows

DIM = 384


def p(values: list[float], q: float) -> float:
    return 1000 * sorted(values)[min(len(values) - 1, int(q * len(values)))]


def bench(n: int, searches: int) -> None:
    rng = np.random.default_rng(n)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = Rows(n + 1)
    now = utcnow()
    started = time.perf_counter()
    for i in range(n):
        meta = {FOLLOWS: f"m{i - 1}"} if i % 2 else {}
        rows.put(MemoryEntry(f"m{i}", "", f"c/{i % 50}", (), now, now, now, metadata=meta))
        rows.set_vector(f"m{i}", "bench", vectors[i])
    build = time.perf_counter() - started
    queries = rng.normal(size=(searches, DIM)).astype(np.float32)
    everything = rows.mask(None, ())
    one_category = rows.mask("c/7", ())
    timings: dict[str, list[float]] = {"raw": [], "store": [], "store+ctx": [], "filtered": []}
    for q in queries:
        t = time.perf_counter()
        scores = vectors @ q
        np.argpartition(-scores, 99)[:100]
        timings["raw"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rows.vector_top(list(q), 100, everything)
        timings["store"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rows.vector_top(list(q), 100, everything, contextual=True)
        timings["store+ctx"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rows.vector_top(list(q), 100, one_category, contextual=True)
        timings["filtered"].append(time.perf_counter() - t)
    cells = "  ".join(
        f"{name} {statistics.median(v) * 1000:6.2f}/{p(v, 0.95):6.2f}"
        for name, v in timings.items()
    )
    load = os.getloadavg()[0]
    matrix_mib = vectors.nbytes / 2**20
    sys.stdout.write(
        f"N={n:>9,}  p50/p95 ms: {cells}  matrix {matrix_mib:.0f} MiB  "
        f"rows built in {build:.1f} s  load {load:.2f}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,300000,1000000")
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        bench(n, args.searches)


if __name__ == "__main__":
    main()

"""Tune hybrid ranking on the LoCoMo dev split (conversations 0-4), in process.

Not collected by pytest. For each conversation every turn is saved into a fresh LongTermStore
with the embedded MiniLM (exactly what memory_bench.py saves over MCP), then each question of
categories 1-4 retrieves BM25 and cosine candidates once, and fusion variants are scored
offline. Run: python tests/bench/tune_hybrid.py [--conversations 0-4]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dreamwell.stores import LongTermStore, MemoryEntry, OnnxMiniLM, rank_hits, utcnow

SHARED = Path(__file__).resolve().parents[3] / "shared"
Fusion = Callable[[list[tuple[str, float]], list[tuple[str, float]]], list[str]]


def load_bench() -> object:
    spec = importlib.util.spec_from_file_location("memory_bench", SHARED / "bench/memory_bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_bench"] = module
    spec.loader.exec_module(module)
    return module


def spec_mean(min_sim: float) -> Fusion:
    return lambda b, c: [i for i, _ in rank_hits(b, c, {}, min_sim)]


def weighted(w: float, min_sim: float) -> Fusion:
    def fuse(b: list[tuple[str, float]], c: list[tuple[str, float]]) -> list[str]:
        top = max((s for _, s in b), default=0.0) or 1.0
        score: dict[str, float] = {}
        for i, s in b:
            score[i] = score.get(i, 0.0) + w * s / top
        for i, s in c:
            if s >= min_sim:
                score[i] = score.get(i, 0.0) + (1 - w) * s
        return sorted(score, key=lambda i: -score[i])

    return fuse


def minmax(w: float) -> Fusion:
    """Both score lists min-max normalised over their candidates, then weighted."""

    def norm(xs: list[tuple[str, float]]) -> dict[str, float]:
        if not xs:
            return {}
        lo, hi = min(s for _, s in xs), max(s for _, s in xs)
        return {i: (s - lo) / (hi - lo or 1.0) for i, s in xs}

    def fuse(b: list[tuple[str, float]], c: list[tuple[str, float]]) -> list[str]:
        nb, nc = norm(b), norm(c)
        score = {i: w * nb.get(i, 0.0) + (1 - w) * nc.get(i, 0.0) for i in nb.keys() | nc.keys()}
        return sorted(score, key=lambda i: -score[i])

    return fuse


def top_and_minmax(w: float, min_sim: float) -> Fusion:
    """BM25 / top score (SPEC) and cosine (above min_sim) min-max normalised, weighted."""

    def fuse(b: list[tuple[str, float]], c: list[tuple[str, float]]) -> list[str]:
        top = max((s for _, s in b), default=0.0) or 1.0
        kept = [(i, s) for i, s in c if s >= min_sim]
        lo, hi = min((s for _, s in kept), default=0.0), max((s for _, s in kept), default=1.0)
        score = {i: w * s / top for i, s in b}
        for i, s in kept:
            score[i] = score.get(i, 0.0) + (1 - w) * (s - lo) / (hi - lo or 1.0)
        return sorted(score, key=lambda i: -score[i])

    return fuse


def rrf(k: int = 60) -> Fusion:
    def fuse(b: list[tuple[str, float]], c: list[tuple[str, float]]) -> list[str]:
        score: dict[str, float] = {}
        for ranked in (b, c):
            for r, (i, _) in enumerate(ranked):
                score[i] = score.get(i, 0.0) + 1 / (k + r)
        return sorted(score, key=lambda i: -score[i])

    return fuse


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--prf", type=int, default=0, help="feedback from the top N hits")
    parser.add_argument("--prf-weight", type=float, default=0.5)
    parser.add_argument("--depth", type=int, default=100, help="candidates from each search")
    args = parser.parse_args()
    bench = load_bench()
    data = json.loads((SHARED / "data/locomo-dev.json").read_text())
    lo, _, hi = args.conversations.partition("-")
    embedder = OnnxMiniLM()
    runs: list[tuple[list[tuple[str, float]], list[tuple[str, float]], set[str]]] = []
    for sample in data[int(lo) : int(hi or lo) + 1]:
        turns, qas, _ = bench.locomo_conversation(sample, False)  # type: ignore[attr-defined]
        with tempfile.TemporaryDirectory() as tmp:
            store = LongTermStore(Path(tmp), embedder=embedder)
            now = utcnow()
            started = time.perf_counter()
            entries = [
                MemoryEntry(f"{n:012x}", t.content, t.category, tuple(t.tags), now, now, now)
                for n, t in enumerate(turns)
            ]
            store.apply(entries)
            by_id = {e.id: t.dia_id for e, t in zip(entries, turns, strict=True)}
            sys.stderr.write(
                f"{sample['sample_id']}: {len(turns)} turns in "
                f"{time.perf_counter() - started:.1f}s\n"
            )
            for qa in qas:
                if qa["category"] not in (1, 2, 3, 4):
                    continue
                text = qa["question"]
                bm25 = store._index.search(text, args.depth)
                qv = embedder.embed([text])[0]
                vec = store._vectors.search(qv, args.depth)
                if args.prf:  # pseudo-relevance feedback: move the query towards the top hits
                    top = [i for i, _ in rank_hits(bm25, vec, {})[: args.prf]]
                    mean = np.mean([store._vectors._vectors[i] for i in top], axis=0)
                    moved = np.asarray(qv) + args.prf_weight * mean
                    vec = store._vectors.search(
                        (moved / np.linalg.norm(moved)).tolist(), args.depth
                    )
                runs.append(
                    (
                        [(by_id[i], s) for i, s in bm25],
                        [(by_id[i], s) for i, s in vec],
                        set(qa["evidence"]),
                    )
                )
    variants: dict[str, Fusion] = {
        "bm25 only": lambda b, _c: [i for i, _ in b],
        "vector only": lambda _b, c: [i for i, _ in c],
        "rrf60": rrf(60),
    }
    for w in (0.5, 0.55, 0.6, 0.65, 0.7):
        variants[f"minmax w_bm25={w}"] = minmax(w)
        for m in (0.0, 0.2):
            variants[f"top+minmax w_bm25={w} min={m}"] = top_and_minmax(w, m)
    for m in (0.0, 0.1, 0.2, 0.3, 0.4):
        variants[f"spec-mean min={m}"] = spec_mean(m)
        for w in (0.3, 0.4, 0.5, 0.6):
            variants[f"weighted w_bm25={w} min={m}"] = weighted(w, m)
    rows = []
    for name, fuse in variants.items():
        r = {1: 0.0, 5: 0.0, 10: 0.0}
        for bm25, vec, evidence in runs:
            ranked = fuse(bm25, vec)
            for k in r:
                r[k] += len(evidence & set(ranked[:k])) / len(evidence)
        rows.append((r[5] / len(runs), r[10] / len(runs), r[1] / len(runs), name))
    for r5, r10, r1, name in sorted(rows, reverse=True):
        sys.stdout.write(f"{name:32s} R@1={r1:.3f} R@5={r5:.3f} R@10={r10:.3f}\n")
    sys.stdout.write(f"{len(runs)} questions (categories 1-4)\n")


if __name__ == "__main__":
    main()

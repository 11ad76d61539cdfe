"""Hybrid ranking (SPEC §4) as pure functions.

Measured on the LoCoMo dev split with the embedded MiniLM (tests/bench/tune_hybrid.py, 760
questions of categories 1-4): the seed's "BM25 / top score, raw cosine, mean where both scored"
gave R@5 0.489 / R@10 0.585 — below BM25 alone (0.502 / 0.582), because an entry found by both
searches is averaged down by its lower half. Min-max normalising each list over its candidates
and weighting keywords 0.6 gave R@5 0.572 / R@10 0.653, so that is the rule here. Cosine below
the embedder's minimum similarity is dropped first, as the seed says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

KEYWORD_WEIGHT = 0.6


def minmax(hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Scores mapped onto [0, 1] over the candidates (all 1.0 when they are equal)."""
    if not hits:
        return {}
    lo = min(s for _, s in hits)
    hi = max(s for _, s in hits)
    if hi <= lo:
        return {i: 1.0 for i, _ in hits}
    return {i: (s - lo) / (hi - lo) for i, s in hits}


def rank_hits(
    bm25: Sequence[tuple[str, float]],
    cosine: Sequence[tuple[str, float]],
    importance: Mapping[str, float],
    min_similarity: float = 0.0,
    keyword_weight: float = KEYWORD_WEIGHT,
) -> list[tuple[str, float]]:
    """Union of keyword and vector candidates, best first, each scored
    `(w·bm25' + (1−w)·cos') × (0.5 + 0.5·importance)` with both parts min-max normalised;
    a part with no candidates leaves the other at full weight (so BM25-only is plain BM25)."""
    keyword = minmax(bm25)
    vector = minmax([(i, s) for i, s in cosine if s >= min_similarity])
    if not vector:
        keyword_weight = 1.0
    elif not keyword:
        keyword_weight = 0.0
    scored: dict[str, float] = {}
    for i in keyword.keys() | vector.keys():
        blended = keyword_weight * keyword.get(i, 0.0) + (1 - keyword_weight) * vector.get(i, 0.0)
        scored[i] = blended * (0.5 + 0.5 * importance.get(i, 0.5))
    return sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))

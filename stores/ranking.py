"""Hybrid ranking (SPEC §4) as pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def normalise_bm25(hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    """BM25 scores divided by the top score, so the best keyword hit is 1.0."""
    top = max((s for _, s in hits), default=0.0)
    if top <= 0:
        return {}
    return {i: s / top for i, s in hits}


def rank_hits(
    bm25: Sequence[tuple[str, float]],
    cosine: Sequence[tuple[str, float]],
    importance: Mapping[str, float],
    min_similarity: float = 0.0,
) -> list[tuple[str, float]]:
    """Union of keyword and vector hits; mean where both scored; × (0.5 + 0.5·importance).

    Cosine similarities below `min_similarity` are dropped; the rest are used as they are
    (already in [0, 1] for unit vectors that are this close)."""
    keyword = normalise_bm25(bm25)
    vector = {i: s for i, s in cosine if s >= min_similarity}
    scored: dict[str, float] = {}
    for i in keyword.keys() | vector.keys():
        parts = [d[i] for d in (keyword, vector) if i in d]
        scored[i] = sum(parts) / len(parts) * (0.5 + 0.5 * importance.get(i, 0.5))
    return sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))

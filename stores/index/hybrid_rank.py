"""Hybrid ranking (docs/recall.md) as pure functions.

Measured on the LoCoMo dev split with the embedded MiniLM (tests/bench/tune_hybrid.py, 760
questions of categories 1-4): the seed's "BM25 / top score, raw cosine, mean where both scored"
gave R@5 0.489 / R@10 0.585 — below BM25 alone (0.502 / 0.582), because an entry found by both
searches is averaged down by its lower half. Min-max normalising each list over its candidates
and weighting keywords 0.6 gave R@5 0.572 / R@10 0.653, so that is the rule here. Cosine below
the embedder's minimum similarity is dropped first, as the seed says.

With e5-small-v2 and query stop-words (issue 10), BM25 0.4 / cosine 0.6 gives R@5 0.637 /
R@10 0.719. A third list, the cosine of each memory read together with the one saved before it
("contextual"), weighted BM25 0.4 / cosine 0.3 / contextual 0.3, gives R@5 0.681 / R@10 0.759
(with the previous memory's text also in the BM25 query at boost 0.5); 0.4/0.4/0.2 and
0.5/0.3/0.2 are within 0.01.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

KEYWORD_WEIGHT = 0.6
CONTEXT_WEIGHT = 0.2  # tuned on the dev split: tests/bench/tune_hybrid.py


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
    contextual: Sequence[tuple[str, float]] = (),
    context_weight: float = CONTEXT_WEIGHT,
    without_vector: Container[str] = (),
) -> list[tuple[str, float]]:
    """Union of keyword, vector and contextual-vector candidates, best first, each scored
    `(wk·bm25' + wv·cos' + wc·ctx') × (0.5 + 0.5·importance)` with every part min-max
    normalised. `wk = keyword_weight`; with contextual cosines (the vectors of each memory
    read with the one saved before it) `wc = min(context_weight, 1 − wk)` and `wv = 1 − wk − wc`,
    without them `wv = 1 − wk`. A part with no candidates gives its weight to the others in
    proportion (so BM25-only is plain BM25). Cosines below `min_similarity` are dropped.
    An entry in `without_vector` (its vector not computed yet) is scored by the parts it can
    be scored in, its keywords: a missing cosine is not counted as the lowest (which sank
    every memory of an ingest the backfill had not reached below the ones it had)."""
    if not (0.0 <= keyword_weight <= 1.0 and 0.0 <= context_weight <= 1.0):
        raise ValueError("keyword_weight and context_weight must lie in [0, 1]")
    context_weight = min(context_weight, 1.0 - keyword_weight)
    parts = [
        (minmax(bm25), keyword_weight),
        (minmax([(i, s) for i, s in cosine if s >= min_similarity]), 1.0 - keyword_weight),
        (minmax([(i, s) for i, s in contextual if s >= min_similarity]), context_weight),
    ]
    if parts[2][0]:
        parts[1] = (parts[1][0], 1.0 - keyword_weight - context_weight)
    present = [(scores, w) for scores, w in parts if scores]
    total = sum(w for _, w in present)
    if total <= 0.0:  # every present part has weight 0: weigh them equally
        present = [(scores, 1.0) for scores, _ in present]
        total = float(len(present))
    scored: dict[str, float] = {}
    for scores, weight in present:
        for i, s in scores.items():
            scored[i] = scored.get(i, 0.0) + weight / total * s
    keywords = parts[0]
    if keywords[0] and total > keywords[1] > 0:
        for i, s in keywords[0].items():
            if i in without_vector:  # its keyword part alone, at full weight
                scored[i] = s
    for i in scored:
        scored[i] *= 0.5 + 0.5 * importance.get(i, 0.5)
    return sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))

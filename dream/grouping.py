"""Consolidation candidates grouped by the store's own vectors: each entry is linked to its
nearest neighbours (cosine >= ~0.55), and the connected groups are cut into prompts of bounded
size, so duplicates in different categories or far apart in time meet in one prompt."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from dreamwell.stores import MemoryEntry, VectorLike

NEIGHBOUR_SIMILARITY = 0.55
NEIGHBOURS = 6
GROUP_PROMPT = 16  # entries per consolidation prompt: small enough for a small local model


def neighbour_groups(
    entries: Sequence[MemoryEntry],
    vectors: Mapping[str, VectorLike],
    threshold: float = NEIGHBOUR_SIMILARITY,
    neighbours: int = NEIGHBOURS,
) -> list[list[MemoryEntry]]:
    """Connected groups of entries, each linked to its nearest neighbours with cosine >=
    `threshold`; entries with no such neighbour (or no vector) are left out. Each group is in
    breadth-first order from its best-connected entry, so close entries stay adjacent."""
    have = [e for e in entries if len(vectors.get(e.id, ())) > 0]
    if len(have) < 2:
        return []
    links = _links([vectors[e.id] for e in have], threshold, neighbours)
    seen: set[int] = set()
    groups: list[list[MemoryEntry]] = []
    for root in sorted(links, key=lambda i: (-len(links[i]), i)):
        if root in seen:
            continue
        order, queue = [], [root]
        seen.add(root)
        while queue:
            i = queue.pop(0)
            order.append(i)
            for j in sorted(links[i], key=lambda j: -links[i][j]):
                if j not in seen:
                    seen.add(j)
                    queue.append(j)
        groups.append([have[i] for i in order])
    return groups


def _links(
    vectors: Sequence[VectorLike], threshold: float, neighbours: int
) -> dict[int, dict[int, float]]:
    """Row -> {row: cosine} for each row's `neighbours` nearest rows at `threshold` or more,
    both ways."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    links: dict[int, dict[int, float]] = defaultdict(dict)
    k = min(neighbours, len(matrix) - 1)
    for start in range(0, len(matrix), 512):
        sims = matrix[start : start + 512] @ matrix.T
        for row, line in enumerate(sims):
            i = start + row
            line[i] = -1.0
            for j in np.argpartition(-line, k - 1)[:k] if k > 0 else ():
                s = float(line[j])
                if s >= threshold:
                    links[i][int(j)] = max(s, links[i].get(int(j), -1.0))
                    links[int(j)][i] = links[i][int(j)]
    return links


def pack_prompts(
    groups: Sequence[Sequence[MemoryEntry]], size: int = GROUP_PROMPT
) -> list[list[MemoryEntry]]:
    """Cut groups larger than `size` into consecutive pieces, then pack whole groups into
    prompts of at most `size` entries (first fit, largest first)."""
    pieces = [list(g[i : i + size]) for g in groups for i in range(0, len(g), size)]
    pieces = [p for p in pieces if len(p) >= 2]
    prompts: list[list[MemoryEntry]] = []
    for piece in sorted(pieces, key=len, reverse=True):
        home = next((p for p in prompts if len(p) + len(piece) <= size), None)
        if home is None:
            prompts.append(list(piece))
        else:
            home.extend(piece)
    return prompts

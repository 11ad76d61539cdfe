"""Hybrid search over a catalog of skills: BM25 (an in-RAM Tantivy index) + cosine.

A catalog holds at most a few thousand skills, so the index is rebuilt in memory whenever the
catalog's generation moves; vectors are kept per (name, revision) across rebuilds, so a change
re-embeds only the skills it touched. Without an embedder (or before its model has loaded)
search is BM25 only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dreamwell.stores.index.hybrid_rank import rank_hits
from dreamwell.stores.index.text_index import IndexDoc, TextIndex

if TYPE_CHECKING:
    from dreamwell.stores.index.embedders import Embedder
    from dreamwell.stores.skills.catalog import Skill

logger = logging.getLogger(__name__)

KEYWORD_WEIGHT = 0.5
MIN_SIMILARITY = 0.0
VECTOR_CHARS = 2000  # name + description + the start of the body is what is embedded
# skills embedded per index build: a catalog of hundreds is embedded over several searches
# (each a few hundred ms at most), never in one that takes many seconds
EMBED_PER_BUILD = 16


def skill_text(skill: Skill) -> str:
    return f"{skill.name.replace('-', ' ')}\n{skill.description}\n{skill.body}"


class VectorCache:
    """Vectors of skills by (name, revision), shared by the successive indexes of a catalog."""

    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder
        self._vectors: dict[tuple[str, int], list[float]] = {}
        self._lock = threading.Lock()

    def usable(self) -> bool:
        found = self.embedder
        return found is not None and bool(getattr(found, "ready", True))

    def vectors(
        self, skills: Sequence[Skill], budget: int = EMBED_PER_BUILD
    ) -> dict[str, list[float]]:
        """name -> vector for `skills`, embedding up to `budget` of those not seen at this
        revision (none when the embedder is missing, not loaded yet or failing)."""
        if not self.usable():
            return {}
        from dreamwell.stores.index.embedders import EmbedderError

        assert self.embedder is not None
        with self._lock:
            missing = [s for s in skills if (s.name, s.revision) not in self._vectors][:budget]
            if missing:
                try:
                    found = self.embedder.embed([skill_text(s)[:VECTOR_CHARS] for s in missing])
                except EmbedderError as exc:
                    logger.warning("skills are searched by keywords only: %s", exc)
                    return {}
                for skill, vector in zip(missing, found, strict=True):
                    self._vectors[(skill.name, skill.revision)] = vector
            live = {(s.name, s.revision) for s in skills}
            for key in [k for k in self._vectors if k not in live]:
                del self._vectors[key]
            return {
                s.name: self._vectors[(s.name, s.revision)]
                for s in skills
                if (s.name, s.revision) in self._vectors
            }


class SkillIndex:
    """The search structures of one catalog snapshot: its text index, and the vectors there
    are (swapped in whole as more arrive; a search reads them once)."""

    def __init__(
        self, skills: Iterable[Skill], cache: VectorCache, min_similarity: float = MIN_SIMILARITY
    ) -> None:
        self._skills = list(skills)
        self._cache = cache
        self._min_similarity = min_similarity
        self._text = TextIndex(None)
        self._text.rebuild(IndexDoc(s.name, skill_text(s), None, ()) for s in self._skills)
        self._vectors: tuple[list[str], Any] = ([], None)  # filled by the searches

    def _refresh(self) -> None:
        """Take the vectors there are (embedding a few more); until every skill has one,
        each search takes a few more (the model loading, or a large catalog)."""
        if len(self._vectors[0]) == len(self._skills) or self._cache.embedder is None:
            return
        vectors = self._cache.vectors(self._skills)
        if len(vectors) == len(self._vectors[0]):
            return
        names = [s.name for s in self._skills if s.name in vectors]
        self._vectors = (names, np.asarray([vectors[n] for n in names], dtype=np.float32))

    def search(self, query: str, limit: int) -> list[tuple[str, float]]:
        """(name, score) best first."""
        self._refresh()
        names, matrix = self._vectors
        bm25 = self._text.search(query, limit=max(limit * 4, 20))
        cosine: list[tuple[str, float]] = []
        if names and query.strip() and self._cache.usable():
            from dreamwell.stores.index.embedders import EmbedderError

            assert self._cache.embedder is not None
            try:
                q = np.asarray(self._cache.embedder.embed_query(query), dtype=np.float32)
                scores = matrix @ q
                top = np.argsort(-scores)[: max(limit * 4, 20)]
                cosine = [(names[i], float(scores[i])) for i in top]
            except EmbedderError as exc:
                logger.warning("skill search by keywords only: %s", exc)
        if not bm25 and not cosine:
            return []
        ranked = rank_hits(bm25, cosine, {}, self._min_similarity, KEYWORD_WEIGHT)
        return ranked[:limit]

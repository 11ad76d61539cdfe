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

from dreamwell.stores.ranking import rank_hits
from dreamwell.stores.text_index import IndexDoc, TextIndex

if TYPE_CHECKING:
    from dreamwell.stores.embedding import Embedder
    from dreamwell.stores.skills import Skill

logger = logging.getLogger(__name__)

KEYWORD_WEIGHT = 0.5
MIN_SIMILARITY = 0.0
VECTOR_CHARS = 2000  # name + description + the start of the body is what is embedded


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

    def vectors(self, skills: Sequence[Skill]) -> dict[str, list[float]]:
        """name -> vector for `skills`, embedding those not seen at this revision (none
        when the embedder is missing, not loaded yet or failing)."""
        if not self.usable():
            return {}
        from dreamwell.stores.embedding import EmbedderError

        assert self.embedder is not None
        with self._lock:
            missing = [s for s in skills if (s.name, s.revision) not in self._vectors]
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
            return {s.name: self._vectors[(s.name, s.revision)] for s in skills}


class SkillIndex:
    """The search structures of one catalog snapshot (immutable once built)."""

    def __init__(
        self, skills: Iterable[Skill], cache: VectorCache, min_similarity: float = MIN_SIMILARITY
    ) -> None:
        self._skills = list(skills)
        self._cache = cache
        self._min_similarity = min_similarity
        self._text = TextIndex(None)
        self._text.rebuild(IndexDoc(s.name, skill_text(s), None, ()) for s in self._skills)
        vectors = cache.vectors(self._skills)
        self._names = [s.name for s in self._skills if s.name in vectors]
        self._matrix: Any = (
            np.asarray([vectors[n] for n in self._names], dtype=np.float32) if self._names else None
        )

    def search(self, query: str, limit: int) -> list[tuple[str, float]]:
        """(name, score) best first."""
        bm25 = self._text.search(query, limit=max(limit * 4, 20))
        cosine: list[tuple[str, float]] = []
        if self._matrix is not None and query.strip() and self._cache.usable():
            from dreamwell.stores.embedding import EmbedderError

            assert self._cache.embedder is not None
            try:
                q = np.asarray(self._cache.embedder.embed_query(query), dtype=np.float32)
                scores = self._matrix @ q
                top = np.argsort(-scores)[: max(limit * 4, 20)]
                cosine = [(self._names[i], float(scores[i])) for i in top]
            except EmbedderError as exc:
                logger.warning("skill search by keywords only: %s", exc)
        if not bm25 and not cosine:
            return []
        ranked = rank_hits(bm25, cosine, {}, self._min_similarity, KEYWORD_WEIGHT)
        return ranked[:limit]

"""This embedder's vectors: loading them, backfilling the missing ones, and lending them out.

Saves do not wait for an embedding (unless `embed_on_save`): `backfill` embeds live entries
without a vector in batches and logs the vectors as their own records. Stored vectors are
read from LanceDB after start-up (`load`; searches meanwhile rank by keywords). A search
that finds a few entries without one embeds them itself, in memory only (`complete`).
Neither embeds a memory another process saved while that process can still log its vector
(`Mirror.claimed`): a memory is embedded once across the processes on a data directory.
"""

from __future__ import annotations

import logging

import numpy as np

from dreamwell.stores import ops
from dreamwell.stores.commit import GroupCommit, Scratch
from dreamwell.stores.embedding import Embedder, EmbedderError
from dreamwell.stores.log import Op
from dreamwell.stores.model import MemoryEntry, Vector
from dreamwell.stores.parts import Parts
from dreamwell.stores.view import View, from_bf16

logger = logging.getLogger(__name__)

SEARCH_EMBEDS = 512  # a search embeds at most this many entries the backfill has not reached


class Vectors:
    def __init__(
        self, parts: Parts, commit: GroupCommit, embedder: Embedder | None, wait_for_model: bool
    ) -> None:
        self.parts = parts
        self.group = commit
        self.embedder = embedder
        self.wait_for_model = wait_for_model

    def load(self) -> None:
        """Read this embedder's vectors from LanceDB into memory. Vectors of edited text are
        left out and re-embedded."""
        m = self.parts.mirror
        if self.embedder is None or m.vectors_ready:
            return
        for ids, hashes, matrix in self.parts.table.vector_blocks(self.embedder.name):
            with m.lock:
                m.adopt_block(ids, hashes, matrix)
        with m.lock:
            m.vectors_ready = True
        if self.missing():
            m.want_vectors()

    def backfill(self, batch: int = 64) -> int:
        """Embed up to `batch` live entries that have no vector from the current embedder and
        log the vectors. Returns how many got one."""
        if self.embedder is None:
            return 0
        # cleared before looking, not after finding nothing: an entry saved in between sets
        # it again, so its wake-up is not lost
        self.parts.mirror.vectors_wanted.clear()
        self.load()
        self.parts.follower.fresh()
        missing = self._without_vector(batch)
        if not missing:
            return 0
        try:
            vectors = self.embedder.embed([e.content for e in missing])
        except EmbedderError as exc:
            logger.warning("backfill paused: %s", exc)
            return 0
        model = self.embedder.name

        def plan(s: Scratch) -> tuple[list[Op], int]:
            logged = [
                ops.vec_op(e, model, v)
                for e, v in zip(missing, vectors, strict=True)
                if (now := s.get(e.id)) is not None and now.live and now.content == e.content
            ]
            return logged, len(logged)

        return self.group.commit(plan)

    def _without_vector(self, batch: int) -> list[MemoryEntry]:
        """Up to `batch` live entries to embed: first those a search embedded but did not
        log, then those without a vector."""
        m = self.parts.mirror
        view = m.view
        missing: list[MemoryEntry] = []
        for entry_id in list(m.unlogged):  # embedded by a search, not logged yet
            entry = view.get(entry_id)
            if entry is not None and entry.live and len(missing) < batch:
                missing.append(entry)
        claimed = m.claimed()  # another process embeds these
        for entry_id in m.rows.without_vector(batch - len(missing) + len(claimed)):
            entry = view.get(entry_id)
            if entry is not None and entry.live and entry_id not in claimed:
                missing.append(entry)
        with m.lock:
            for entry in missing[:batch]:
                m.foreign.pop(entry.id, None)
        return missing[:batch]

    def of_model(self, model: str) -> dict[str, Vector]:
        """Every entry's vector made by `model`: the current embedder's as held in memory
        (pending ones included), another model's as stored in LanceDB."""
        if self.embedder is not None and model == self.embedder.name:
            self.load()
            self.parts.follower.fresh()
            m = self.parts.mirror
            with m.lock:
                rows = m.rows
                if rows.vec is None:
                    return {}
                n = rows.n
                have = np.flatnonzero(rows.has_vec[:n])
                matrix = from_bf16(rows.vec[have])  # a new array
                ids = [rows.ids[r] for r in have.tolist()]
            return {entry_id: matrix[k] for k, entry_id in enumerate(ids)}
        stored = self.parts.table.vectors(model)
        return {i: np.asarray(v.values, dtype=np.float32) for i, v in stored.items()}

    def missing(self) -> int:
        if self.embedder is None:
            return 0
        self.parts.follower.fresh()
        m = self.parts.mirror
        return m.view.live_count - m.rows.vector_count() + len(m.unlogged)

    def complete(self, view: View) -> bool:
        """Whether every live entry has a vector, embedding the few the background backfill
        has not reached yet (in memory only: a search writes nothing). A partial set of
        vectors would distort the blend, so with many missing the search is BM25 only."""
        m = self.parts.mirror
        if self.embedder is None or not m.vectors_ready:
            return False
        if not self.wait_for_model and not getattr(self.embedder, "ready", True):
            return False  # the model is still loading: keywords now rather than a wait
        rows = m.rows
        claimed = m.claimed()  # another process embeds these: ranked by keywords meanwhile
        found = rows.without_vector(SEARCH_EMBEDS + 1 + len(claimed))
        missing = [i for i in found if i not in claimed]
        if not missing:
            return bool(rows.n) and (not claimed or rows.vector_count() > 0)
        if len(missing) > SEARCH_EMBEDS:
            return False
        entries = [e for i in missing if (e := view.get(i)) is not None and e.live]
        try:
            vectors = self.embedder.embed([e.content for e in entries])
        except EmbedderError as exc:
            logger.warning("embedding at search time failed (%s); keyword search only", exc)
            return False
        with m.lock:
            for entry, vector in zip(entries, vectors, strict=True):
                current = m.view.get(entry.id)
                if current is not None and current.content == entry.content:
                    m.rows.set_vector(entry.id, self.embedder.name, vector)
                    m.unlogged.add(entry.id)
        return True

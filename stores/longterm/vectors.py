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
import time
from collections.abc import Callable, Sequence

import numpy as np

from dreamwell.stores.index.embedders import Embedder, EmbedderError
from dreamwell.stores.index.view import View
from dreamwell.stores.longterm import operations as ops
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.group_commit import GroupCommit, Scratch
from dreamwell.stores.longterm.log import Op
from dreamwell.stores.model import MemoryEntry, Vector

logger = logging.getLogger(__name__)

# A search embeds entries the backfill has not reached only while their text is this short in
# all (~40 ms of e5 on one core): embedding 512 entries in a search, as it once could, took
# seconds of a tool call during a backfill (issue 24). Beyond that they wait for the backfill.
SEARCH_EMBED_CHARS = 1_000  # ~40 ms
SEARCH_EMBEDS = 8  # and this many entries at most (8 short ones: ~33 ms on one core)
# While they wait, a hybrid search ranks them by their keywords (`rank_hits`' without_vector).
HOLD_STALL = 2.0  # seconds without a new vector after which a held save goes ahead
# A save over the bound waits a short while for the backfill, not until the backfill has
# embedded and logged its whole batch (issue 57: 350-500 ms of e5 for 64 LoCoMo turns inside
# one save in each batch, the save tail's p99 168 ms and max 501 ms over 1,000 saves): a
# burst is paced by many short waits. HOLD_STEP while at most HOLD_CEILING x the bound wait;
# past that (an embedder slower than the saves so paced: about 50 a second) the wait grows
# with the backlog, to HOLD_LONGEST. A held save goes ahead early once the backlog is
# HOLD_SLACK under the bound: the backfill lends each vector as it comes, and going ahead at
# the first one held every save of a burst a few ms (its p50), where a few saves held a step
# pay the same wait (the embedder's pace) with the others not held at all.
HOLD_STEP = 0.012
HOLD_SLACK = 4
HOLD_CEILING = 2
HOLD_LONGEST = 0.1
# A backlog over this many times the bound is not a burst to pace but an import or a new
# embedder working through the store: waiting for it would hold every save for minutes.
HOLD_SCALE = 10


Embed = Callable[[Callable[[Sequence[str]], list[list[float]]], Sequence[str]], list[list[float]]]


def _hold_for(waiting: int, backlog: int) -> float:
    """Seconds a save waits at most while `waiting` memories wait for a vector (bound
    `backlog`): HOLD_STEP, longer past HOLD_CEILING x the bound, HOLD_LONGEST at most."""
    over = waiting / (HOLD_CEILING * backlog)
    return min(HOLD_LONGEST, HOLD_STEP * max(1.0, over))


def _direct(
    embed: Callable[[Sequence[str]], list[list[float]]], texts: Sequence[str]
) -> list[list[float]]:
    return embed(texts)


class Vectors:
    def __init__(
        self, parts: Parts, commit: GroupCommit, embedder: Embedder | None, wait_for_model: bool
    ) -> None:
        self.parts = parts
        self.group = commit
        self.embedder = embedder
        self.wait_for_model = wait_for_model
        # a search embeds (in memory) what another process saved and may never log a vector
        # for: a resident hook process, whose savers are sessions that end within a second
        self.search_embeds_others = False

    def load(self) -> None:
        """Read this embedder's vectors from LanceDB into memory. Vectors of edited text are
        left out and re-embedded."""
        m = self.parts.mirror
        if self.embedder is None or m.vectors_ready:
            return
        with m.lock:
            m.rows.defer_index = True  # the lists once, at the end (a store of a million)
        for ids, hashes, matrix in self.parts.table.vector_blocks(self.embedder.name):
            with m.lock:
                m.adopt_block(ids, hashes, matrix)
        with m.lock:
            m.rows.index_now()
            m.vectors_ready = True
        if self.missing():
            m.want_vectors()

    def backfill(self, batch: int = 64, embed: Embed | None = None) -> int:
        """Embed up to `batch` live entries that have no vector from the current embedder and
        log the vectors. Returns how many got one. `embed(fn, texts)` runs `fn(texts)`, the
        embedder's own `embed`, as it likes (the server: on two threads of low priority)."""
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
            texts = [e.content for e in missing]
            vectors = (embed or _direct)(self._lending(missing), texts)
        except EmbedderError as exc:
            logger.warning("backfill paused: %s", exc)
            return 0
        model = self.embedder.name

        def plan(s: Scratch) -> tuple[list[Op], int]:
            logged = self._still_wanted(s, missing, model, vectors)
            return logged, len(logged)

        return self.group.commit(plan)

    def _lending(self, entries: list[MemoryEntry]) -> Callable[[Sequence[str]], list[list[float]]]:
        """The embedder's `embed` for a backfill of `entries`, one text at a time, each vector
        lent to this process's searches and to held saves as it comes (`_lend`), not when the
        batch is logged: a held save went ahead only when a whole batch of 64 landed, so that
        every save of the burst meanwhile waited its full HOLD_STEP (issue 57: the save tail's
        p99 at 30 ms). Texts are embedded alone anyway (`BATCH_SIZE`)."""
        assert self.embedder is not None
        embedder = self.embedder
        by_text: dict[str, list[MemoryEntry]] = {}
        for entry in entries:
            by_text.setdefault(entry.content, []).append(entry)

        def embed(texts: Sequence[str]) -> list[list[float]]:
            out: list[list[float]] = []
            for text in texts:
                out.extend(vector := embedder.embed([text]))
                same = by_text.get(text, [])  # memories of this text
                self._lend(same, vector * len(same))
            return out

        return embed

    def _still_wanted(
        self, s: Scratch, embedded: list[MemoryEntry], model: str, vectors: list[list[float]]
    ) -> list[Op]:
        """The vector records of `embedded` still to log when the commit is planned (the
        mirror read up to the log's end, under the write lock): not for a memory gone or
        edited since, nor for one whose vector was logged while this process embedded it (a
        saver slower than the grace logged its own meanwhile, e.g. another replica on
        object storage). A vector a search computed but did not log is still logged."""
        m = self.parts.mirror
        with m.lock:
            logged_since = {
                e.id for e in embedded if m.rows.has_vector(e.id) and e.id not in m.unlogged
            }
        return [
            ops.vec_op(e, model, v)
            for e, v in zip(embedded, vectors, strict=True)
            if (now := s.get(e.id)) is not None
            and now.live
            and now.content == e.content
            and e.id not in logged_since
        ]

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
                matrix = rows.vec.rows(have)  # a new array
                ids = [rows.ids[r] for r in have.tolist()]
            return {entry_id: matrix[k] for k, entry_id in enumerate(ids)}
        stored = self.parts.table.vectors(model)
        return {i: np.asarray(v.values, dtype=np.float32) for i, v in stored.items()}

    def hold_save(self, backlog: int) -> None:
        """Before a save: while more than `backlog` of this process's memories wait for a
        vector, give the backfill a short while (`_hold_for`; less once the backlog is
        HOLD_SLACK under the bound), as long as it embeds vectors at
        least every HOLD_STALL seconds (an embedder that is down or a process without a
        backfill holds nothing) and the backlog is a burst's (at most HOLD_SCALE x `backlog`).
        A burst of saves is then paid for by its saver, at the embedder's pace, instead of by
        every search after it: those rank hundreds of memories by keywords alone until the
        backfill is through them (issue 24: LoCoMo R@5 0.687 -> 0.596 with questions right
        after the saves)."""
        m = self.parts.mirror
        if self.embedder is None:
            return
        limit: float | None = None
        with m.vectors_came:
            while True:
                now = time.monotonic()
                quiet = now - m.vector_progress
                waiting = m.view.live_count - m.rows.vector_count() - len(m.claimed())
                if quiet >= HOLD_STALL or waiting > HOLD_SCALE * backlog:
                    return
                if limit is None:
                    if waiting <= backlog:
                        return
                    limit = now + _hold_for(waiting, backlog)
                elif now >= limit or waiting <= backlog - HOLD_SLACK:
                    return
                m.vectors_came.wait(min(HOLD_STALL - quiet, limit - now))

    def missing(self) -> int:
        if self.embedder is None:
            return 0
        self.parts.follower.fresh()
        m = self.parts.mirror
        return m.view.live_count - m.rows.vector_count() + len(m.unlogged)

    def complete(self, view: View) -> bool:
        """Whether to blend vectors into this search. A few short entries the backfill has
        not reached are embedded here (in memory only: a search writes nothing); entries
        another process embeds, or more text than that, are ranked by their keywords until
        their vectors arrive."""
        m = self.parts.mirror
        if self.embedder is None or not m.vectors_ready:
            return False
        if not self.wait_for_model and not getattr(self.embedder, "ready", True):
            return False  # the model is still loading: keywords now rather than a wait
        rows = m.rows
        claimed: set[str] = set() if self.search_embeds_others else m.claimed()
        counted = rows.vector_count()  # 0.15 ms at a million rows: counted once
        waiting = view.live_count - counted - len(claimed)
        if 0 < waiting <= SEARCH_EMBEDS:  # a few of this process's own: embed them here?
            entries = [
                e
                for i in rows.without_vector(len(claimed) + waiting)
                if i not in claimed and (e := view.get(i)) is not None and e.live
            ]
            if sum(len(e.content) for e in entries) <= SEARCH_EMBED_CHARS:
                self._embed_here(entries)
        return counted > 0 or rows.vector_count() > 0  # recounted only if there were none

    def _embed_here(self, entries: list[MemoryEntry]) -> None:
        """Give these entries vectors in memory; the backfill logs them."""
        assert self.embedder is not None
        try:
            vectors = self.embedder.embed([e.content for e in entries])
        except EmbedderError as exc:
            logger.warning("embedding at search time failed (%s); ranked by keywords", exc)
            return
        self._lend(entries, vectors)

    def _lend(self, entries: Sequence[MemoryEntry], vectors: Sequence[list[float]]) -> None:
        """Give these entries (their text unchanged since) vectors in memory, to be logged by
        the backfill (`unlogged`), and wake the saves held for vectors."""
        assert self.embedder is not None
        m = self.parts.mirror
        with m.vectors_came:
            for entry, vector in zip(entries, vectors, strict=True):
                current = m.view.get(entry.id)
                if current is not None and current.live and current.content == entry.content:
                    m.rows.set_vector(entry.id, self.embedder.name, vector)
                    m.unlogged.add(entry.id)
            if entries:
                m.vector_progress = time.monotonic()
                m.vectors_came.notify_all()

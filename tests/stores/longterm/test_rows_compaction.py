"""A process's rows (one per entry it has seen, each with a vector) are rebuilt without those
of deleted entries once they outnumber the entries: a server that saves and deletes for months
must not hold a row and a vector for every memory it ever saw."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import dreamwell.stores.longterm.checkpoint as checkpoint
from dreamwell.stores import LongTermStore
from dreamwell.stores.index.rows import Rows
from dreamwell.stores.index.view import View
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow
from tests.support.embedders import HashEmbedder
from tests.support.vectors import RESCORE, clustered


def _entries(n: int) -> list[MemoryEntry]:
    now = utcnow()
    return [
        MemoryEntry(
            f"m{i}", "x", f"c/{i % 4}", (f"t{i % 3}",), now, now, now,
            metadata={FOLLOWS: f"m{i - 1}"} if i % 5 else {},
        )
        for i in range(n)
    ]  # fmt: skip


def _answers(rows: Rows, queries: np.ndarray) -> list[object]:
    out: list[object] = []
    for q in queries:
        for mask in (rows.mask(None, ()), rows.mask("c/1", ()), rows.mask(None, ("t2",))):
            out.append(rows.vector_top(list(q), 20, mask, contextual=True))
    return out


def test_compacted_rows_keep_their_held_vectors_answer_as_a_store_opened_afresh_and_the_old_ones_are_untouched() -> (  # noqa: E501
    None
):
    entries = _entries(3_000)
    vectors = clustered(3_000, 4)
    rows = Rows(1024, rescore=RESCORE)
    for entry, vector in zip(entries, vectors, strict=True):
        rows.put(entry)
        rows.set_vector(entry.id, "test", vector)
    gone = set(np.random.default_rng(5).choice(3_000, 1_800, replace=False).tolist())
    for i in sorted(gone):
        rows.remove(f"m{i}")
    kept = [e for i, e in enumerate(entries) if i not in gone]
    queries = clustered(6, 6)
    before = _answers(rows, queries)

    compacted = rows.compacted(kept)
    # what a store opened on these entries builds: every row, then every vector
    fresh = Rows(1024, rescore=RESCORE)
    for entry in kept:
        fresh.put(entry)
    for i, entry in enumerate(entries):
        if i not in gone:
            fresh.set_vector(entry.id, "test", vectors[i])
    # one at a time, the centre is the mean of the first vectors (RESCORE, then each time
    # they quadruple); the rebuild takes the mean of all of them, as this does
    fresh._centre()

    n = fresh.n
    assert compacted.ids == fresh.ids and n < rows.n - 1_000
    assert compacted.n <= 2 * len(kept)  # rows of followed entries that are gone stay empty
    assert fresh.vec is not None and compacted.vec is not None and compacted.codes is not None
    assert fresh.codes is not None and rows.vec is not None
    assert np.array_equal(compacted.has_vec[:n], fresh.has_vec[:n])
    have = np.flatnonzero(compacted.has_vec[:n])
    # the held rows are the old ones, from the old centre: rebuilt, not rounded a second time
    old_rows = np.array([rows.row_of[compacted.ids[r]] for r in have.tolist()])
    assert compacted.vec.centre is rows.vec.centre
    assert np.array_equal(compacted.vec.rows(have), rows.vec.rows(old_rows))
    # a store opened afresh centres on its own first vectors: the same rows within a step
    assert fresh.vec.centre is not None and not np.array_equal(fresh.vec.centre, rows.vec.centre)
    assert np.abs(compacted.vec.rows(have) - fresh.vec.rows(have)).max() < 0.02
    # norms of up to five summed rows, each within half a step: 1.1e-3 apart at most here
    assert np.allclose(compacted.ctx_norm[:n], fresh.ctx_norm[:n], atol=3e-3)
    assert np.allclose(compacted.codes[0], fresh.codes[0], atol=1e-3)
    assert compacted.linked == fresh.linked and all(
        compacted.tags.rows_with(t, compacted.n) == fresh.tags.rows_with(t, fresh.n)
        for t in ("t0", "t1", "t2")
    )
    # the same ranking up to near-ties (this data's 10th and 11th are ~2e-4 apart)
    overlap = []
    for got, afresh in zip(_answers(compacted, queries), _answers(fresh, queries), strict=True):
        for ours, theirs in zip(got, afresh, strict=True):  # plain, contextual
            shared = dict(theirs)
            assert all(abs(score - shared[i]) < 2e-3 for i, score in ours if i in shared)
            overlap.append(len(shared.keys() & dict(ours).keys()) / max(len(ours), 1))
    assert np.mean(overlap) >= 0.9
    # a reader still holding the old rows gets what it got before the rebuild
    assert _answers(rows, queries) == before


def test_a_store_that_saves_and_deletes_keeps_rows_for_its_entries_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "ROWS_SLACK", 40)
    store = LongTermStore(tmp_path, embedder=HashEmbedder())
    store.load_vectors()
    kept: list[str] = []
    for round_ in range(6):
        ids = [
            store.save(f"note {round_} {i} about topic {i % 7}", "work", caller="s/a").entry.id
            for i in range(60)
        ]
        while store.backfill():
            pass
        for entry_id in ids[:50]:
            store.delete(entry_id)
        kept += ids[50:]
        before = store._rows
        store.checkpoint()
        # 60 rows a round, 10 entries kept: rebuilt whenever rows > 2 x entries + 40
        assert store._rows.n <= 2 * len(kept) + 40 + 60
        if before.n > 2 * len(kept) + 40:
            assert store._rows is not before
    assert store._rows.n < 6 * 60 / 2  # without the rebuilds: a row for each of the 360
    afresh = LongTermStore(tmp_path, embedder=HashEmbedder())
    afresh.load_vectors()
    assert afresh._rows.vector_count() == store._rows.vector_count() == len(kept)
    for query in ("topic 3", "note 5 about", "topic 6 note"):
        assert [(h.entry.id, round(h.score, 6)) for h in store.search(query)] == [
            (h.entry.id, round(h.score, 6)) for h in afresh.search(query)
        ]
    assert {h.entry.id for h in store.search("note")} <= set(kept)


def test_a_view_counts_its_entries_live_and_archived_through_every_change() -> None:
    entries = _entries(5_000)  # more changes than an overlay holds: folded into new bases
    rng = np.random.default_rng(8)
    view = View()
    for step in range(3_000):
        changes: dict[str, MemoryEntry | None] = {}
        for i in rng.integers(0, 5_000, 4).tolist():
            roll = rng.random()
            entry = entries[i]
            archived = replace(entry, archived_at=entry.created_at)
            changes[entry.id] = None if roll < 0.3 else archived if roll < 0.4 else entry
        view = view.with_changes(changes)
        if step % 500 == 0 or step == 2_999:
            held = list(view.values())
            assert view.size == len(held)
            assert view.live_count == sum(e.live for e in held)

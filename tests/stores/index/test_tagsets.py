"""Rows' tag filter holds one int32 per row naming its tag list (a set of row numbers per tag
took ~65 bytes a row): filters answer as the per-row tags say, and lists no row uses any more
are dropped, so a store whose entries keep getting new tags does not pile them up."""

from __future__ import annotations

import random

import numpy as np

from dreamwell.stores.index.rows import Rows
from dreamwell.stores.index.tagsets import TagSets
from dreamwell.stores.model import MemoryEntry, utcnow


def test_tag_masks_match_each_row_s_tags_through_changes_growth_and_renumbering() -> None:
    rng = random.Random(4)
    sets = TagSets(8)
    truth: dict[int, tuple[str, ...]] = {}
    vocabulary = [f"t{i}" for i in range(40)]
    for step in range(20_000):
        row = step if step < 300 else rng.randrange(300)  # 300 rows, then changes to them
        if step == 8:
            sets.grow(512)  # the column is replaced with room for more rows
        tags = tuple(rng.sample(vocabulary, rng.randrange(4)))
        truth[row] = tags
        sets.put(row, tags, len(truth))
    n = len(truth)
    assert n == 300
    for tag in vocabulary:
        want = {r for r, tags in truth.items() if tag in tags}
        assert sets.rows_with(tag, n) == want
    assert all(sets.tags(r) == truth[r] for r in range(n))
    # ~9,000 distinct lists were put; only those the 300 rows use (and the slack) are held
    assert sets.distinct() <= 2 * n + 1024 + 1


def test_a_store_s_rows_filter_by_tag_as_entries_say() -> None:
    now = utcnow()
    rows = Rows(capacity=4)
    entries = [
        MemoryEntry(f"m{i}", "x", None, (("a",), ("a", "b"), (), ("b",))[i % 4], now, now, now)
        for i in range(50)
    ]
    for e in entries:
        rows.put(e)
    retagged = MemoryEntry("m0", "x", None, ("b",), now, now, now)
    rows.put(retagged)
    by_id = {e.id: e for e in entries} | {"m0": retagged}
    for tags in (("a",), ("b",), ("a", "b"), ()):
        got = {rows.ids[r] for r in np.flatnonzero(rows.mask(None, tags)).tolist()}
        assert got == {i for i, e in by_id.items() if all(t in e.tags for t in tags)}

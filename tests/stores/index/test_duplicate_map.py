"""The duplicate map is two sorted arrays (16 bytes a memory, where a dict of Python ints took
~87) plus a small overlay of changes: it answers as a dict would through sets, removals,
repeated keys and folds, and a store opened on 3,000 memories holds its map as arrays."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from dreamwell.stores import LongTermStore
from dreamwell.stores.index.duplicate_map import FOLD_AT, DupIndex
from dreamwell.stores.model import MemoryEntry, utcnow


def test_the_map_answers_as_a_dict_through_sets_removals_and_folds() -> None:
    rng = random.Random(9)
    start = [(rng.getrandbits(64), f"id{i}") for i in range(3000)]
    start += [(start[5][0], "later")]  # a repeated key: the last id wins
    model = dict(start)
    index = DupIndex(
        np.array([k for k, _ in start], dtype=np.uint64),
        np.array([v for _, v in start], dtype=object),
    )
    keys = list(model)
    for step in range(3 * FOLD_AT + 100):  # folds three times
        if rng.random() < 0.5:
            key = rng.choice(keys) if rng.random() < 0.5 else rng.getrandbits(64)
            keys.append(key)
            model[key] = index_value = f"n{step}"
            index[key] = index_value
        elif model:
            key = rng.choice(keys)
            if key in model:
                del model[key]
                del index[key]
        probe = rng.choice(keys)
        assert index.get(probe) == model.get(probe)
    assert dict(index) == model and len(index) == len(model)
    assert index.get(2**64 - 1) is None and index.get(0, "none") == "none"


def test_a_reopened_store_holds_its_duplicate_map_as_arrays_and_finds_duplicates(
    tmp_path: Path,
) -> None:
    store = LongTermStore(tmp_path)
    now = utcnow()
    store.apply([MemoryEntry(f"{i:012x}", f"tide table {i}", "sea", (), now, now, now)
                 for i in range(3000)])  # fmt: skip
    store.checkpoint()
    reopened = LongTermStore(tmp_path)
    dups = reopened._parts.mirror.dups
    assert isinstance(dups, DupIndex) and len(dups._base[0]) == 3000 and not dups._over
    again = reopened.save("Tide  table 1234!", category="sea")  # folded text: the same
    assert again.reinforced and again.entry.id == f"{1234:012x}"
    assert not reopened.save("tide table 1234", category="land").reinforced

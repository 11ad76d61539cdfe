"""The duplicate map: a live memory's id by the 64-bit digest of its category and folded text.

Held as two arrays sorted by digest (uint64 digests, the ids as object references shared
with the view): 16 bytes a memory, where a dict of Python ints took about 87 at 100,000
memories. Changes go to a small dict first and are folded into new arrays, swapped whole,
once it holds FOLD_AT of them, so a reader always sees a consistent pair. One writer at a
time (the mirror's lock); readers take no lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, overload

import numpy as np
import numpy.typing as npt

FOLD_AT = 4096

_Ids = npt.NDArray[np.object_]
_Keys = npt.NDArray[np.uint64]


class DupIndex(Mapping[int, str]):
    def __init__(self, keys: _Keys | None = None, ids: _Ids | None = None) -> None:
        """From `keys` and `ids` in the same order; for a repeated key the last id wins."""
        self._base: tuple[_Keys, _Ids] = _sorted(
            np.zeros(0, dtype=np.uint64) if keys is None else keys,
            np.zeros(0, dtype=object) if ids is None else ids,
        )
        self._over: dict[int, str | None] = {}  # changes since the fold; None: removed

    @overload
    def get(self, key: int, /) -> str | None: ...
    @overload
    def get(self, key: int, /, default: str | Any) -> str | Any: ...
    def get(self, key: int, /, default: Any = None) -> Any:
        over = self._over
        if key in over:
            found = over[key]
            return default if found is None else found
        keys, ids = self._base  # read after the overlay: a fold swaps the arrays first
        at = int(np.searchsorted(keys, np.uint64(key)))
        if at < len(keys) and int(keys[at]) == key:
            return ids[at]
        return default

    def __getitem__(self, key: int) -> str:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return str(found)

    def __setitem__(self, key: int, entry_id: str) -> None:
        self._over[key] = entry_id
        self._maybe_fold()

    def __delitem__(self, key: int) -> None:
        if self.get(key) is None:
            raise KeyError(key)
        self._over[key] = None
        self._maybe_fold()

    def __iter__(self) -> Iterator[int]:
        over = dict(self._over)
        keys, _ = self._base
        for key in keys.tolist():
            if key not in over:
                yield key
        yield from (k for k, v in over.items() if v is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _maybe_fold(self) -> None:
        over = self._over
        if len(over) < FOLD_AT:
            return
        keys, ids = self._base
        changed = np.fromiter(over, dtype=np.uint64, count=len(over))
        keep = ~np.isin(keys, changed)
        added = [(k, v) for k, v in over.items() if v is not None]
        new_ids = np.empty(len(added), dtype=object)
        new_ids[:] = [v for _, v in added]
        self._base = _sorted(
            np.concatenate([keys[keep], np.fromiter((k for k, _ in added), dtype=np.uint64)]),
            np.concatenate([ids[keep], new_ids]),
        )
        self._over = {}


def _sorted(keys: _Keys, ids: _Ids) -> tuple[_Keys, _Ids]:
    """Sorted by key, one entry per key (the last given)."""
    order = np.argsort(keys, kind="stable")
    keys, ids = keys[order], ids[order]
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return keys[last], ids[last]

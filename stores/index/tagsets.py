"""Which rows carry a tag: one small integer per row naming its tag list.

Entries share a few tag lists (most memories carry none or the same one or two), so each
distinct list is held once and a row holds the number of its list in an int32 column: 4
bytes a row, where a set of row numbers per tag took about 65 bytes a row (a Python int
and a set slot each) at 100,000 memories. A tag filter is the rows whose list holds the tag:
the lists that do, then one `np.isin` over the column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

_SLACK = 1024  # lists no row uses any more, at most, above the rows before they are dropped


class TagSets:
    def __init__(self, capacity: int) -> None:
        # (the distinct lists, the column: per row the number of its list; 0 is the empty
        # list), one tuple swapped whole so that a reader pairs a column with its lists
        self._held: tuple[list[tuple[str, ...]], npt.NDArray[np.int32]] = (
            [()],
            np.zeros(capacity, dtype=np.int32),
        )
        self._number: dict[tuple[str, ...], int] = {(): 0}

    def grow(self, capacity: int) -> None:
        """Room for `capacity` rows: the column is replaced whole (readers keep the old one)."""
        lists, old = self._held
        new = np.zeros(capacity, dtype=np.int32)
        new[: len(old)] = old
        self._held = (lists, new)

    def put(self, row: int, tags: tuple[str, ...], rows: int) -> None:
        """Row `row` (of `rows` in use) now carries `tags`."""
        number = self._number.get(tags)
        if number is None:
            if len(self._held[0]) > 2 * rows + _SLACK:
                self._drop_unused(rows)
            lists = self._held[0]
            number = len(lists)
            lists.append(tags)  # a reader's copy of the column names none of it yet
            self._number[tags] = number
        self._held[1][row] = number

    def _drop_unused(self, rows: int) -> None:
        """Renumber the lists rows still use (lists of entries whose tags changed since, or of
        deleted rows, would otherwise pile up): new lists and column, swapped whole."""
        lists, old = self._held
        used, renumbered = np.unique(old[:rows], return_inverse=True)
        if len(used) == 0 or used[0] != 0:  # list 0 stays the empty one
            used = np.concatenate([[0], used]).astype(used.dtype)
            renumbered += 1
        column = np.zeros(len(old), dtype=np.int32)
        column[:rows] = renumbered
        kept = [lists[k] for k in used.tolist()]
        self._number = {tags: k for k, tags in enumerate(kept)}
        self._held = (kept, column)

    def tags(self, row: int) -> tuple[str, ...]:
        lists, column = self._held
        return lists[int(column[row])]

    def mask(self, tag: str, n: int) -> npt.NDArray[np.bool_]:
        """Rows 0..n-1 that carry `tag`."""
        lists, column = self._held
        holding = [k for k, tags in enumerate(lists) if tag in tags]
        return np.isin(column[:n], np.asarray(holding, dtype=np.int32))

    def rows_with(self, tag: str, n: int) -> set[int]:
        rows: Any = np.flatnonzero(self.mask(tag, n))
        return set(rows.tolist())

    def distinct(self) -> int:
        return len(self._held[0])

"""What readers read: an immutable view of the entries.

`View` is never changed after it is made: a writer builds the next one (a shared base dict
plus a small copy-on-write overlay, folded into a new base now and then) and swaps the
reference, so a search works on one consistent set of entries however long it takes and
never waits for a writer.

Beside it, `Rows` (stores/index/rows.py) is the columnar mirror for top-k: one row per entry
in numpy columns, with the vectors, so filters are boolean masks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from dreamwell.stores.index.packed_entries import (
    Brief,
    Packed,
    brief,
    entries_of,
    filtered_importance,
    is_live,
    live_importance,
    pack,
    project_mark,
    text_digest,
    unpack,
)
from dreamwell.stores.model import PROJECT, MemoryEntry, text_hash

# overlay size at which it is folded into a new base, inside the save that reaches it: the
# base's copy (5 ms at 100,000 entries) and the overlay's packing (54 ms for 4,096 entries, 14
# for 1,024); each save copies the overlay, so a small one is cheaper there too
_FOLD_AT = 1024


@dataclass(frozen=True)
class View:
    """The entries: `base` holds them packed (`stores/index/packed_entries.py`: one bytes object
    each, an entry rebuilt when read), `over` the changes since the last fold as entries."""

    base: MappingProxyType[str, Packed] = field(default_factory=lambda: MappingProxyType({}))
    over: MappingProxyType[str, MemoryEntry | None] = field(
        default_factory=lambda: MappingProxyType({})
    )
    categories: MappingProxyType[str, int] = field(default_factory=lambda: MappingProxyType({}))
    live_count: int = 0
    size: int = 0  # entries, live and archived

    def get(self, entry_id: str) -> MemoryEntry | None:
        if entry_id in self.over:
            return self.over[entry_id]
        record = self.base.get(entry_id)
        return None if record is None else unpack(entry_id, record)

    def brief(self, entry_id: str) -> Brief | None:
        """What a search filters and ranks on (live, category, tags, importance), without
        rebuilding the entry."""
        if entry_id in self.over:
            entry = self.over[entry_id]
            return None if entry is None else brief(entry)
        record = self.base.get(entry_id)
        return None if record is None else brief(record)

    def importance(self, entry_id: str) -> float | None:
        """The importance of a live entry; None when it is gone or archived."""
        if entry_id in self.over:
            entry = self.over[entry_id]
            return entry.importance if entry is not None and entry.live else None
        record = self.base.get(entry_id)
        return None if record is None else live_importance(record)

    def text_hash(self, entry_id: str) -> str | None:
        """`model.text_hash` of an entry's text (None: no such entry), without rebuilding it."""
        if entry_id in self.over:
            entry = self.over[entry_id]
            return None if entry is None else text_hash(entry.content)
        record = self.base.get(entry_id)
        return None if record is None else text_digest(record)

    def filtered_importance(
        self,
        entry_id: str,
        category: bytes | None,
        tags: Sequence[bytes],
        project: str | None = None,
    ) -> float | None:
        """`importance` for an entry under `category` (a prefix at a segment boundary)
        carrying every one of `tags` (both UTF-8) and, with `project`, of that project or
        global; None otherwise."""
        if entry_id in self.over:
            return _entry_weight(self.over[entry_id], category, tags, project)
        record = self.base.get(entry_id)
        if isinstance(record, bytes):
            mark = project_mark(project) if project is not None else None
            return filtered_importance(record, category, tags, mark)
        return _entry_weight(record, category, tags, project)  # None, or an entry as it is

    def values(self) -> Iterator[MemoryEntry]:
        for entry_id, record in self.base.items():
            if entry_id not in self.over:
                yield unpack(entry_id, record)
        for changed in self.over.values():
            if changed is not None:
                yield changed

    def with_changes(self, changes: Mapping[str, MemoryEntry | None]) -> View:
        """A new view with `changes` applied (None deletes); this one is left as it was."""
        counts = dict(self.categories)
        live, size = self.live_count, self.size
        for entry_id, new in changes.items():
            old = self.brief(entry_id)
            size += (new is not None) - (old is not None)
            if old is not None and old.live:
                live -= 1
                if old.category:
                    counts[old.category] -= 1
                    if counts[old.category] == 0:
                        del counts[old.category]
            if new is not None and new.live:
                live += 1
                if new.category:
                    counts[new.category] = counts.get(new.category, 0) + 1
        # a proxy's own copy() copies the dict it wraps as a dict copies itself; dict(proxy)
        # and {**proxy} go key by key through the mapping protocol (100,000 entries: 5 ms
        # against 80). The fold of a 4,096-change overlay into a 100,000-entry base took 135
        # ms inside the save that made it (issue 44's slowest saves).
        over = self.over.copy()
        over.update(changes)
        if len(over) < _FOLD_AT:
            return View(self.base, MappingProxyType(over), MappingProxyType(counts), live, size)
        base = self.base.copy()
        for entry_id, new in over.items():
            if new is None:
                base.pop(entry_id, None)
            else:
                base[entry_id] = pack(new)
        return View(
            MappingProxyType(base), MappingProxyType({}), MappingProxyType(counts), live, size
        )

    @staticmethod
    def of(entries: Sequence[MemoryEntry]) -> View:
        """The view of `entries` (a PackedEntries' records are taken as they are)."""
        base: dict[str, Packed] = dict(entries_of(entries))  # the last of an id wins
        counts: dict[str, int] = {}
        live = 0
        for record in base.values():
            if is_live(record):
                live += 1
                category = brief(record).category
                if category:
                    counts[category] = counts.get(category, 0) + 1
        frozen = MappingProxyType(base)
        return View(frozen, categories=MappingProxyType(counts), live_count=live, size=len(base))


def _entry_weight(
    entry: MemoryEntry | None,
    category: bytes | None,
    tags: Sequence[bytes],
    project: str | None = None,
) -> float | None:
    """`View.filtered_importance` of an entry held as an object."""
    if entry is None or not entry.live:
        return None
    if project is not None and (entry.metadata.get(PROJECT) or project) != project:
        return None
    if any(t.decode("utf-8", "surrogatepass") not in entry.tags for t in tags):
        return None
    if category is not None:
        held = (entry.category or "").encode("utf-8", "surrogatepass")
        if held != category and not held.startswith(category + b"/"):
            return None
    return entry.importance

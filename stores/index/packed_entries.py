"""Entries held compactly: one bytes object per entry instead of an object graph.

A `MemoryEntry` read from LanceDB is a slotted object, its text, a time and, for a memory
saved in a stream, a metadata mapping: about 350 bytes of Python objects above its text at
100,000 memories (500 in a contextual store), which the mirror held for every entry although
a search reads whole entries only for its hits. Packed, an entry is one `bytes`: a fixed head
(times as microseconds since the epoch, the counts and scores) and its category, tags,
metadata and text as UTF-8, about 120 bytes above its text. `unpack` rebuilds an equal entry
(a few microseconds) and `brief` reads what a search filters and ranks on without building
one. An entry whose times are not in UTC (they could not be rebuilt exactly) is kept as it is.

`PackedEntries` is a list of entries held so: a read of the whole table returns one, and
the view takes its records as they are.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from datetime import datetime, timedelta, timezone
from typing import NamedTuple, TypeAlias, overload

from dreamwell.stores.model import NO_METADATA, PROJECT, MemoryEntry, Metadata, text_hash

Packed: TypeAlias = "bytes | MemoryEntry"  # a record, or the entry itself when it cannot pack

# created, updated, last seen, last used, decayed, archived (microseconds since the epoch,
# _NONE for None), reinforcement count, importance, score, then the byte lengths of the
# category, the tags (joined by NUL, which a tag cannot contain) and the metadata (JSON)
_HEAD = struct.Struct("<7q2d3I")
_BRIEF = struct.Struct("<40xq8xd8x3I")  # archived, importance, the three lengths
_ARCHIVED = struct.Struct("<40xq")
_WEIGHT = struct.Struct("<40xq8xd")  # archived, importance
_NONE = -(2**63)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_SHARED_MAX = 65_536
_CATEGORIES: dict[bytes, str] = {}
_TAGS: dict[bytes, tuple[str, ...]] = {b"": ()}


class Brief(NamedTuple):
    """What a search filters and ranks on, read from a record without building the entry."""

    live: bool
    category: str | None
    tags: tuple[str, ...]
    importance: float


def _micros(value: datetime | None) -> int | None:
    """Microseconds since the epoch, _NONE for None; None when the time is not in UTC."""
    if value is None:
        return _NONE
    if value.utcoffset() != timedelta(0) or value.tzname() != "UTC":
        return None  # naive, another zone, or a zone that is UTC only at this instant
    return (value - _EPOCH) // _US


def pack(entry: MemoryEntry) -> Packed:
    """`entry` as one bytes object, or the entry itself when a time is not in UTC, a tag is
    empty or holds a NUL, the category is empty or a number does not fit."""
    times = [
        _micros(t)
        for t in (
            entry.created_at,
            entry.updated_at,
            entry.last_seen_at,
            entry.last_used_at,
            entry.decayed_at,
            entry.archived_at,
        )
    ]
    if None in times or entry.category == "" or any(not t or "\0" in t for t in entry.tags):
        return entry
    category = (entry.category or "").encode("utf-8", "surrogatepass")
    tags = "\0".join(entry.tags).encode("utf-8", "surrogatepass")
    meta = json.dumps(dict(entry.metadata)).encode() if entry.metadata else b""
    text = entry.content.encode("utf-8", "surrogatepass")
    try:
        head = _HEAD.pack(
            *times,
            entry.reinforcement_count,
            entry.importance,
            entry.score,
            len(category),
            len(tags),
            len(meta),
        )
    except struct.error:  # a count beyond 64 bits
        return entry
    return b"".join((head, category, tags, meta, text))


def _category(raw: bytes) -> str | None:
    if not raw:
        return None
    found = _CATEGORIES.get(raw)
    if found is None:
        found = sys.intern(raw.decode("utf-8", "surrogatepass"))
        if len(_CATEGORIES) < _SHARED_MAX:
            _CATEGORIES[raw] = found
    return found


def _tags(raw: bytes) -> tuple[str, ...]:
    found = _TAGS.get(raw)
    if found is None:
        found = tuple(sys.intern(t) for t in raw.decode("utf-8", "surrogatepass").split("\0"))
        if len(_TAGS) < _SHARED_MAX:
            _TAGS[raw] = found
    return found


def _time(micros: int) -> datetime | None:
    return None if micros == _NONE else _EPOCH + micros * _US


_SLOTS = [getattr(MemoryEntry, f.name).__set__ for f in fields(MemoryEntry)]


def _entry(*values: object) -> MemoryEntry:
    """A MemoryEntry from its fields in order, valid as they are (as read from a record):
    the slots set directly, without the dataclass's checks (half the cost of a rebuild)."""
    entry: MemoryEntry = object.__new__(MemoryEntry)
    for put, value in zip(_SLOTS, values, strict=True):
        put(entry, value)
    return entry


def unpack(entry_id: str, record: Packed) -> MemoryEntry:
    """The entry `record` holds (equal to the one packed)."""
    if type(record) is not bytes:
        assert isinstance(record, MemoryEntry)
        return record
    created, updated, seen, used, decayed, archived, count, importance, score, *sizes = (
        _HEAD.unpack_from(record)
    )
    at = _HEAD.size
    category = _category(record[at : at + sizes[0]])
    at += sizes[0]
    tags = _tags(record[at : at + sizes[1]])
    at += sizes[1]
    meta = Metadata(json.loads(record[at : at + sizes[2]])) if sizes[2] else NO_METADATA
    at += sizes[2]
    created_at = _EPOCH + created * _US
    updated_at = created_at if updated == created else _EPOCH + updated * _US
    return _entry(
        entry_id,
        record[at:].decode("utf-8", "surrogatepass"),
        category,
        tags,
        created_at,
        updated_at,
        updated_at if seen == updated else _EPOCH + seen * _US,
        count,
        importance,
        score,
        _time(used),
        _time(decayed),
        meta,
        _time(archived),
    )


def brief(record: Packed) -> Brief:
    """Live, category, tags and importance of the entry `record` holds."""
    if type(record) is not bytes:
        assert isinstance(record, MemoryEntry)
        return Brief(record.live, record.category, record.tags, record.importance)
    archived, importance, cat_len, tag_len, _ = _BRIEF.unpack_from(record)
    at = _HEAD.size
    category = _category(record[at : at + cat_len])
    tags = _tags(record[at + cat_len : at + cat_len + tag_len])
    return Brief(archived == _NONE, category, tags, importance)


def live_importance(record: Packed) -> float | None:
    """The importance of a live entry, None for an archived one (the cheapest read: a search
    without a filter weighs each candidate by it)."""
    if type(record) is not bytes:
        assert isinstance(record, MemoryEntry)
        return record.importance if record.live else None
    archived, importance = _WEIGHT.unpack_from(record)
    return float(importance) if archived == _NONE else None


def text_digest(record: Packed) -> str:
    """`model.text_hash` of the entry's text, from its UTF-8 bytes as held."""
    if type(record) is not bytes:
        assert isinstance(record, MemoryEntry)
        return text_hash(record.content)
    *_, cat_len, tag_len, meta_len = _HEAD.unpack_from(record)
    text = record[_HEAD.size + cat_len + tag_len + meta_len :]
    return hashlib.sha256(text).hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def project_mark(project: str) -> bytes:
    """What a packed record's metadata holds when it belongs to `project` (`pack` writes the
    metadata with json.dumps: a key is the only place a bare `"project": ` can appear)."""
    return b'"' + PROJECT.encode() + b'": ' + json.dumps(project).encode()


_ANY_PROJECT = b'"' + PROJECT.encode() + b'": '


def filtered_importance(
    record: bytes, category: bytes | None, tags: Sequence[bytes], project: bytes | None = None
) -> float | None:
    """`live_importance` for an entry under `category` (a prefix at a segment boundary)
    carrying every one of `tags` and, with `project` (a `project_mark`), of that project or
    global, else None: compared as UTF-8 bytes, nothing decoded."""
    archived, importance, cat_len, tag_len, meta_len = _BRIEF.unpack_from(record)
    if archived != _NONE:
        return None
    at = _HEAD.size
    if category is not None:
        held = record[at : at + cat_len]
        if held != category and not held.startswith(category + b"/"):
            return None
    if tags:
        held_tags = record[at + cat_len : at + cat_len + tag_len].split(b"\0")
        if not all(t in held_tags for t in tags):
            return None
    if project is not None and meta_len:
        at += cat_len + tag_len
        meta = record[at : at + meta_len]
        if _ANY_PROJECT in meta and project not in meta:
            return None
    return float(importance)


def is_live(record: Packed) -> bool:
    if type(record) is not bytes:
        assert isinstance(record, MemoryEntry)
        return record.live
    return bool(_ARCHIVED.unpack_from(record)[0] == _NONE)


class PackedEntries(Sequence[MemoryEntry]):
    """Entries held packed; each is rebuilt when read (iterate once per use)."""

    def __init__(self, entries: Iterable[MemoryEntry] = ()) -> None:
        self.ids: list[str] = []
        self.records: list[Packed] = []
        for entry in entries:
            self.append(entry)

    def append(self, entry: MemoryEntry) -> None:
        self.ids.append(entry.id)
        self.records.append(pack(entry))

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> MemoryEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MemoryEntry]: ...
    def __getitem__(self, index: int | slice) -> MemoryEntry | Sequence[MemoryEntry]:
        if isinstance(index, slice):
            return [unpack(i, r) for i, r in zip(self.ids[index], self.records[index], strict=True)]
        return unpack(self.ids[index], self.records[index])

    def __iter__(self) -> Iterator[MemoryEntry]:
        for entry_id, record in zip(self.ids, self.records, strict=True):
            yield unpack(entry_id, record)

    def items(self) -> Iterator[tuple[str, Packed]]:
        return zip(self.ids, self.records, strict=True)


def entries_of(items: Sequence[MemoryEntry]) -> Iterator[tuple[str, Packed]]:
    """(id, record) of each entry: a PackedEntries' records as they are, others packed."""
    if isinstance(items, PackedEntries):
        return items.items()
    return ((e.id, pack(e)) for e in items)

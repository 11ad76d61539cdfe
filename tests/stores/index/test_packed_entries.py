"""The mirror holds entries packed (one bytes object each), not as an object graph per entry:
what it gives back is equal to what was saved, and a store opened on 3,000 memories holds no
`MemoryEntry` per memory (the text and fields of every entry as Python objects took about
350 bytes above the text at 100,000 memories)."""

from __future__ import annotations

import gc
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamwell.stores import LongTermStore
from dreamwell.stores.index import view as view_module
from dreamwell.stores.index.packed_entries import (
    PackedEntries,
    brief,
    is_live,
    live_importance,
    pack,
    unpack,
)
from dreamwell.stores.index.view import View
from dreamwell.stores.longterm.search import Filter, matches
from dreamwell.stores.model import FOLLOWS, PROJECT, MemoryEntry, entry_to_dict, utcnow

UTC = timezone.utc
_times = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)
_category = st.none() | st.from_regex(r"[a-z]{1,5}(/[a-z0-9_-]{1,5}){0,2}", fullmatch=True)
_tags = st.lists(st.text("abcdé ÿ-", min_size=1, max_size=8), max_size=4, unique=True)


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    optional = st.none() | _times
    return MemoryEntry(
        id=draw(st.text("0123456789abcdef", min_size=12, max_size=12)),
        content=draw(_text),
        category=draw(_category),
        tags=tuple(draw(_tags)),
        created_at=draw(_times),
        updated_at=draw(_times),
        last_seen_at=draw(_times),
        reinforcement_count=draw(st.integers(0, 2**62)),
        importance=draw(st.floats(allow_nan=False)),
        score=draw(st.floats(allow_nan=False)),
        last_used_at=draw(optional),
        decayed_at=draw(optional),
        metadata=draw(st.dictionaries(_text, _text, max_size=3)),
        archived_at=draw(optional),
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(entries())
def test_an_entry_packs_to_bytes_and_unpacks_equal_field_for_field(entry: MemoryEntry) -> None:
    record = pack(entry)
    assert type(record) is bytes
    back = unpack(entry.id, record)
    assert back == entry
    assert entry_to_dict(back) == entry_to_dict(entry)  # times print the same (UTC)
    assert brief(record) == (entry.live, entry.category, entry.tags, entry.importance)
    assert is_live(record) == entry.live
    assert live_importance(record) == (entry.importance if entry.live else None)


_project = st.sampled_from(["github.com/a/b", "github.com/a/bc", '"project": "x"', "é/\\"])


@settings(max_examples=300, deadline=None)
@given(
    entries(),
    st.none() | _category,
    _tags,
    st.booleans(),
    st.none() | _project,
    st.none() | _project,
)
def test_a_filter_on_a_packed_record_or_a_held_entry_passes_what_matches_passes(
    entry: MemoryEntry,
    category: str | None,
    tags: list[str],
    overlay: bool,
    own: str | None,
    project: str | None,
) -> None:
    if own is not None:  # the entry belongs to a project (a key in its metadata)
        entry = replace(entry, metadata={**entry.metadata, PROJECT: own})
    if entry.tags and tags:
        tags = [*tags[:1], entry.tags[0]]  # often a tag the entry has
    if entry.category and category is None and overlay:
        category = entry.category.split("/")[0]  # often a prefix of its own category
    view = View.of([entry])
    if overlay:
        view = View().with_changes({entry.id: entry})
    under = () if category is None else (category,)
    want = entry.importance if matches(entry, Filter(under, tags, project)) else None
    cat = category.encode() if category is not None else None
    got = view.filtered_importance(entry.id, cat, [t.encode() for t in tags], project)
    assert got == want
    assert view.importance(entry.id) == (entry.importance if entry.live else None)


def test_an_entry_that_would_not_come_back_exactly_is_kept_as_it_is() -> None:
    now = utcnow()
    paris = now.astimezone(timezone(timedelta(hours=1)))  # the same instant, printed +01:00
    for odd in (
        MemoryEntry("a" * 12, "text", None, (), paris, paris, paris),
        MemoryEntry("b" * 12, "text", None, ("bad\0tag",), now, now, now),
        MemoryEntry("c" * 12, "text", None, (), now, now, now, reinforcement_count=2**70),
        MemoryEntry("d" * 12, "text", None, ("",), now, now, now),
        MemoryEntry("e" * 12, "text", "", (), now, now, now),
        MemoryEntry("f" * 12, "text", None, (), now.replace(tzinfo=None), now, now),
    ):
        assert pack(odd) is odd and unpack(odd.id, odd) is odd
        assert brief(odd) == (True, odd.category, odd.tags, 0.5)


def test_packed_entries_read_back_as_a_sequence_of_entries() -> None:
    now = utcnow()
    made = [
        MemoryEntry(f"{i:012x}", f"note {i} ✓", "a/b" if i % 2 else None, ("x",), now, now, now,
                    metadata={FOLLOWS: f"{i - 1:012x}"} if i else {})
        for i in range(5)
    ]  # fmt: skip
    held = PackedEntries(made)
    assert len(held) == 5 and list(held) == made and held[3] == made[3] and held[1:3] == made[1:3]
    assert all(type(r) is bytes for _, r in held.items())
    view = View.of(held)
    assert view.get(made[2].id) == made[2] and list(view.values()) == made
    assert view.live_count == 5 and dict(view.categories) == {"a/b": 2}


def _live_entry_objects() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is MemoryEntry)


def test_a_store_opened_on_3000_memories_holds_no_entry_object_per_memory(
    tmp_path: Path,
) -> None:
    """The teeth: were the mirror to hold each entry as a MemoryEntry again (with its text as
    a str of its own), a reopened store would keep 3,000 of them alive."""
    store = LongTermStore(tmp_path)
    now = utcnow()
    saved = [
        MemoryEntry(f"{i:012x}", f"the lighthouse keeper's note {i}", f"log/{i % 3}", ("sea",),
                    now, now, now, metadata={FOLLOWS: f"{i - 1:012x}"} if i else {})
        for i in range(3000)
    ]  # fmt: skip
    store.apply(saved)
    store.checkpoint()
    del store
    before = _live_entry_objects()
    reopened = LongTermStore(tmp_path)
    assert reopened.count() == 3000
    assert _live_entry_objects() - before < 100  # with entries held as objects: 3,000
    assert reopened.get(saved[1234].id) == saved[1234]
    hits = reopened.search("lighthouse keeper note 1234", category="log/1", tags="sea")
    assert hits and hits[0].entry == saved[1234]
    assert reopened.entries() == saved
    assert _live_entry_objects() - before < 100  # what reads built is gone with them


def test_a_view_changed_across_folds_holds_what_the_changes_say() -> None:
    """The overlay is folded into a new base every `_FOLD_AT` changes (copied through the
    base's own copy(), not key by key); views made before a fold keep what they held."""
    now = utcnow()

    def entry(i: int, text: str) -> MemoryEntry:
        return MemoryEntry(f"{i:012d}", text, f"c/{i % 3}", (), now, now, now)

    want = {f"{i:012d}": entry(i, f"first {i}") for i in range(300)}
    view = View.of(list(want.values()))
    early = view
    for step in range(3 * view_module._FOLD_AT + 7):  # three folds and an overlay
        i = step % 500
        if step % 5 == 4:
            want.pop(f"{i:012d}", None)
            view = view.with_changes({f"{i:012d}": None})
        else:
            want[f"{i:012d}"] = entry(i, f"step {step}")
            view = view.with_changes({f"{i:012d}": want[f"{i:012d}"]})
    assert {e.id: e for e in view.values()} == want
    assert view.size == len(want) and view.live_count == len(want)
    assert view.categories == {
        c: sum(e.category == c for e in want.values()) for c in ("c/0", "c/1", "c/2")
    }
    assert early.size == 300 and early.get(f"{0:012d}") == entry(0, "first 0")

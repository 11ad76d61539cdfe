"""LongTermStore on real LanceDB + Tantivy in tmp_path."""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from dreamwell.stores import InvalidInput, LongTermStore, NotFound, utcnow


def contents(store: LongTermStore, query: str) -> list[str]:
    return [h.entry.content for h in store.search(query)]


def test_records_and_index_survive_a_restart(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    saved = store.save("Kayaking on Lake Michigan", "hobbies", "outdoor").entry
    again = LongTermStore(tmp_path)
    assert again.get(saved.id) == saved
    assert contents(again, "kayak") == ["Kayaking on Lake Michigan"]


def test_a_deleted_index_directory_is_rebuilt_from_lancedb(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for i in range(20):
        store.save(f"fact {i} about rivers")
    del store
    shutil.rmtree(tmp_path / "index")
    reopened = LongTermStore(tmp_path)
    assert len(reopened.search("rivers", limit=50)) == 20


@pytest.mark.parametrize("damage", ["meta", "segments", "garbage-file"])
def test_a_corrupted_index_is_rebuilt_from_lancedb(tmp_path: Path, damage: str) -> None:
    store = LongTermStore(tmp_path)
    for i in range(5):
        store.save(f"note {i} about mountains")
    del store
    index = tmp_path / "index"
    if damage == "meta":
        (index / "meta.json").write_text("{not json")
    elif damage == "segments":
        for f in index.iterdir():
            if f.suffix in (".idx", ".term", ".store"):
                f.write_bytes(b"\x00garbage")
    else:
        for f in index.iterdir():
            if f.is_file():
                f.write_bytes(b"")
    reopened = LongTermStore(tmp_path)
    assert len(reopened.search("mountains")) == 5
    if damage == "meta":  # unreadable: set aside whole, never deleted
        kept = list(tmp_path.glob("index.corrupt-*"))
        assert len(kept) == 1 and (kept[0] / "meta.json").read_text() == "{not json"


def test_an_index_out_of_step_with_the_records_is_rebuilt(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    store.save("alpha centauri")
    # a process that died between the LanceDB write and the index commit leaves this state
    (tmp_path / "longterm.state").write_text('{"generation": 1, "version": 0}')
    reopened = LongTermStore(tmp_path)
    reopened.save("beta centauri")
    assert sorted(contents(reopened, "centauri")) == ["alpha centauri", "beta centauri"]


def test_reinforcement_keeps_created_and_moves_last_seen(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    t0 = utcnow() - timedelta(days=3)
    first = store.save("Likes jazz", "music", now=t0).entry
    second = store.save("likes JAZZ.", "music", "live").entry
    assert second.id == first.id
    assert second.created_at == t0 and second.last_seen_at > t0
    assert second.reinforcement_count == 2 and second.tags == ("live",)
    assert contents(store, "live") == ["Likes jazz"]


def test_archived_entries_are_invisible_to_search_and_restorable(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    entry = store.save("secret garden path").entry
    store.apply([replace(entry, archived_at=utcnow())])
    assert contents(store, "garden") == []
    assert store.search(None) == []
    assert [e.id for e in store.entries(include_archived=True)] == [entry.id]
    store.apply([replace(entry, archived_at=None)])
    assert contents(store, "garden") == ["secret garden path"]


def test_delete_of_unknown_id_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="No memory entry found with id 'zzz'"):
        LongTermStore(tmp_path).delete("zzz")


def test_invalid_input_raises_before_anything_is_written(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    with pytest.raises(InvalidInput):
        store.save("x", category="a/../b")
    with pytest.raises(InvalidInput):
        store.save("x", tags=["ok", "bad,tag"] * 1 + ["t" * 65])
    assert store.entries(include_archived=True) == []


def test_metadata_and_all_fields_round_trip(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    entry = store.save("trip to Lisbon", "travel", metadata={"subjectTime": "2024-05"}).entry
    changed = replace(
        entry,
        importance=0.9,
        score=1.5,
        last_used_at=utcnow(),
        decayed_at=utcnow(),
        reinforcement_count=4,
    )
    store.apply([changed])
    assert LongTermStore(tmp_path).get(entry.id) == changed


def test_maintenance_compacts_and_keeps_everything_searchable(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for i in range(30):
        store.save(f"compaction fact {i}")
    store.maintain(keep_versions_for=timedelta(minutes=1))
    assert len(store.search("compaction", limit=50)) == 30
    assert len(LongTermStore(tmp_path).search("compaction", limit=50)) == 30

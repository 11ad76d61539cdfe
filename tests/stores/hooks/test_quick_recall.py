"""The hooks' reader (stores/hooks/quick_recall.py) on its snapshot: which categories a
session start's `recent` takes, with the category index the snapshot now has."""

from __future__ import annotations

from pathlib import Path

from dreamwell.stores import DataDir, LongTermStore
from dreamwell.stores.hooks import QuickRecall, write_snapshot
from dreamwell.stores.longterm import StateFile

CATEGORIES = (
    "preferences",
    "preferences/ui",
    "preferences/ui/dark",
    "preferences-old",  # '-' sorts before '/': a look-alike, not under
    "preferencesx",
    "preferences0",  # '0' follows '/': the range's end, not under
    "user-preferences",
    "ops",
)


def test_recent_takes_a_prefix_and_what_is_under_it_and_no_look_alike(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for category in CATEGORIES:
        store.save(f"a memory filed under {category}", category=category)
    dirs = DataDir(tmp_path)
    store.checkpoint()  # the log folded: the reader takes them from the snapshot, not the log
    write_snapshot(dirs, store.entries(), StateFile(dirs.state).read().checkpoint)
    reader = QuickRecall(dirs)
    try:
        assert not reader._tail.overlay  # what follows is the snapshot's SQL, not the log
        found = {e.category for e in reader.recent(20, ("preferences",))}
        both = {e.category for e in reader.recent(20, ("preferences", "user-preferences"))}
        plan = reader._db.execute(  # type: ignore[union-attr]
            "EXPLAIN QUERY PLAN SELECT body FROM entries WHERE category >= ? AND category < ?",
            ("preferences/", "preferences0"),
        ).fetchall()
    finally:
        reader.close()
    assert found == {"preferences", "preferences/ui", "preferences/ui/dark"}
    assert both == found | {"user-preferences"}
    assert any("entries_category" in str(row) for row in plan), plan

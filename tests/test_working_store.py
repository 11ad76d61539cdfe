"""WorkingMemory persistence, TTL and sweeping on a real data directory."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from dreamwell.stores import InvalidInput, NotFound, WorkingMemory, utcnow

NS = "session/abc123"


def test_stored_at_and_expiry_survive_a_restart(tmp_path: Path) -> None:
    t0 = utcnow() - timedelta(minutes=2)
    saved = WorkingMemory(tmp_path).save(NS, "k", "v", ttl_minutes=10, now=t0).entry
    again = WorkingMemory(tmp_path).get("k", NS)
    assert again == saved and again.stored_at == t0


def test_one_atomic_file_per_top_segment(tmp_path: Path) -> None:
    wm = WorkingMemory(tmp_path)
    wm.save(NS, "k", "v")
    wm.save("patrol/heartbeat", "k", "v")
    files = sorted(p.name for p in (tmp_path / "working-memory").glob("*.json"))
    assert files == ["patrol.json", "session.json"]
    data = json.loads((tmp_path / "working-memory" / "session.json").read_text())
    assert [d["key"] for d in data] == [f"{NS}/k"]
    assert not list((tmp_path / "working-memory").glob("*.tmp"))


def test_expired_entries_are_not_returned_and_dropped_on_load(tmp_path: Path) -> None:
    t0 = utcnow() - timedelta(minutes=10)
    wm = WorkingMemory(tmp_path)
    wm.save(NS, "old", "v", ttl_minutes=5, now=t0)
    wm.save(NS, "new", "v", ttl_minutes=60)
    with pytest.raises(NotFound, match=f"'{NS}/old' not found or has expired"):
        wm.get("old", NS)
    assert [e.key for e in WorkingMemory(tmp_path).listing(NS)] == [f"{NS}/new"]


def test_sweep_removes_expired_entries_from_disk(tmp_path: Path) -> None:
    wm = WorkingMemory(tmp_path)
    wm.save(NS, "a", "v", ttl_minutes=1)
    wm.save(NS, "b", "v", ttl_minutes=60)
    assert wm.sweep(now=utcnow() + timedelta(minutes=2)) == 1
    data = json.loads((tmp_path / "working-memory" / "session.json").read_text())
    assert [d["key"] for d in data] == [f"{NS}/b"]


def test_a_second_process_sees_writes_of_the_first(tmp_path: Path) -> None:
    one, two = WorkingMemory(tmp_path), WorkingMemory(tmp_path)
    one.save(NS, "shared", "hello")
    assert two.get(f"{NS}/shared", "session/other").value == "hello"
    two.save("session/other", "mine", "x")
    assert {e.key for e in one.listing("session")} == {f"{NS}/shared", "session/other/mine"}


def test_an_unreadable_file_is_ignored_not_fatal(tmp_path: Path) -> None:
    wm_dir = tmp_path / "working-memory"
    wm_dir.mkdir()
    (wm_dir / "session.json").write_text("[{broken")
    wm = WorkingMemory(tmp_path)
    assert wm.listing("session") == []
    wm.save(NS, "k", "v")
    assert WorkingMemory(tmp_path).get("k", NS).value == "v"


def test_nothing_is_written_outside_the_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    wm = WorkingMemory(data)
    for key in ("../../escape", "..", "session/../../x", "/etc/passwd", "a/../../b"):
        with pytest.raises(InvalidInput, match=r"is not valid|own namespace"):
            wm.save(NS, key, "v")
    outside = {p for p in tmp_path.rglob("*") if data not in p.parents and p != data}
    assert outside == set()

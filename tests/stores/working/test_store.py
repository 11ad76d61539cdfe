"""WorkingMemory persistence, TTL and sweeping on a real data directory."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from dreamwell.stores import InvalidInput, NotFound, WorkingMemory, WriteFailed, utcnow

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


# ---- damaged files and failed writes ---------------------------------------------------------
def _item(key: str, value: str = "v") -> dict[str, object]:
    now = utcnow()
    return {
        "key": key,
        "value": value,
        "stored_at": now.isoformat(),
        "expires_at": (now + timedelta(hours=1)).isoformat(),
        "category": None,
        "tags": [],
    }


def test_a_malformed_item_is_skipped_and_the_rest_survive_the_next_save(tmp_path: Path) -> None:
    folder = tmp_path / "working-memory"
    folder.mkdir()
    bad = {"key": f"{NS}/k2", "value": 5, "stored_at": "yesterday"}
    original = json.dumps([_item(f"{NS}/k1"), bad, _item(f"{NS}/k3")])
    (folder / "session.json").write_text(original)
    wm = WorkingMemory(tmp_path)
    assert [e.key for e in wm.listing(NS)] == [f"{NS}/k1", f"{NS}/k3"]
    wm.save(NS, "k4", "new")
    again = WorkingMemory(tmp_path)
    assert [e.key for e in again.listing(NS)] == [f"{NS}/k1", f"{NS}/k3", f"{NS}/k4"]
    (aside,) = folder.glob("session.json.corrupt-*")
    assert aside.read_text() == original  # the bad item is kept, not overwritten


@pytest.mark.parametrize(
    "content", ['[{"key": "session/abc123/k1", "val', "{}", b"\xff\xfe not utf-8", "null"]
)
def test_a_file_that_cannot_be_parsed_is_kept_aside_never_overwritten(
    tmp_path: Path, content: str | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "working-memory"
    folder.mkdir()
    raw = content.encode() if isinstance(content, str) else content
    (folder / "session.json").write_bytes(raw)
    wm = WorkingMemory(tmp_path)
    assert wm.listing(NS) == []
    wm.save(NS, "k", "after")
    (aside,) = folder.glob("session.json.corrupt-*")
    assert aside.read_bytes() == raw
    assert "session.json" in caplog.text and aside.name in caplog.text
    assert WorkingMemory(tmp_path).get("k", NS).value == "after"


def test_a_naive_timestamp_is_a_malformed_item_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "working-memory"
    folder.mkdir()
    naive = _item(f"{NS}/naive") | {"expires_at": "2999-01-01T00:00:00"}
    (folder / "session.json").write_text(json.dumps([naive, _item(f"{NS}/ok")]))
    assert [e.key for e in WorkingMemory(tmp_path).listing(NS)] == [f"{NS}/ok"]


@pytest.mark.parametrize("errno", [28, 30])  # ENOSPC, EROFS
def test_a_failed_write_changes_nothing_on_disk_or_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errno: int
) -> None:
    wm = WorkingMemory(tmp_path)
    wm.save(NS, "kept", "old")
    before = (tmp_path / "working-memory" / "session.json").read_bytes()

    def refuse(*_args: object) -> None:
        raise OSError(errno, os.strerror(errno))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(WriteFailed, match="Nothing was saved"):
        wm.save(NS, "new", "value")
    with pytest.raises(WriteFailed):
        wm.save(NS, "kept", "overwritten")
    monkeypatch.undo()
    with pytest.raises(NotFound):
        wm.get("new", NS)
    assert wm.get("kept", NS).value == "old"
    assert (tmp_path / "working-memory" / "session.json").read_bytes() == before
    assert not list((tmp_path / "working-memory").glob(".*.tmp"))


def test_a_lock_that_cannot_be_created_is_a_write_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wm = WorkingMemory(tmp_path)

    def refuse(*_args: object, **_kw: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(wm._flock, "acquire", refuse)
    with pytest.raises(WriteFailed, match="permissions"):
        wm.save(NS, "k", "v")


def test_a_value_with_a_lone_surrogate_is_a_malformed_item(tmp_path: Path) -> None:
    """Such a value cannot be encoded as UTF-8: served, it took the stdio transport down."""
    folder = tmp_path / "working-memory"
    folder.mkdir()
    bad = json.dumps([_item(f"{NS}/bad", "x"), _item(f"{NS}/ok")]).replace('"x"', '"\\ud800"')
    (folder / "session.json").write_text(bad)
    assert [e.key for e in WorkingMemory(tmp_path).listing(NS)] == [f"{NS}/ok"]

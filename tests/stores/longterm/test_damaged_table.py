"""Damaged LanceDB files on start-up: one unreadable fragment or a lost manifest must not take
down the other memories or working memory; what the log still holds is restored, the rest is
named (in the log and a report under `damaged/`), and the damaged file is kept, never deleted."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore
from tests.support.calls import ok
from tests.support.cli import exit_code

pytestmark = pytest.mark.anyio

LANCE = Path("lancedb") / "memories.lance"


def _three_checkpoints(data: Path) -> list[list[str]]:
    """Three batches of 20, one checkpoint (one LanceDB fragment) each; returns their ids.
    The snapshot (written at the first checkpoint) holds batch 1, the log all three."""
    store = LongTermStore(data)
    batches = []
    for b in range(3):
        batch = [
            store.save(f"fact batch{b} item{i} tok{b}x{i}", category="t").entry.id
            for i in range(20)
        ]
        assert store.checkpoint()
        batches.append(batch)
    return batches


def _data_files(data: Path) -> list[Path]:
    """Data files, oldest first (each checkpoint wrote one)."""
    return sorted((data / LANCE / "data").glob("*.lance"), key=lambda p: p.stat().st_mtime_ns)


def _manifests(data: Path) -> list[Path]:
    """Manifests, newest first (V2 names count down from 2**64 - 1)."""
    return sorted((data / LANCE / "_versions").glob("*.manifest"))


def _report(data: Path) -> dict[str, object]:
    reports = list((data / "damaged").glob("longterm-*.json"))
    assert len(reports) == 1, reports
    parsed: dict[str, object] = json.loads(reports[0].read_text())
    return parsed


def _no_other_copy(data: Path) -> None:
    """Remove the copies of batch 1 outside LanceDB: the snapshot and the first log segment."""
    (data / "longterm.snapshot.gz").unlink()
    (data / "wal" / f"{1:020d}.log").unlink()


def _found(store: LongTermStore, token: str) -> bool:
    return any(token in h.entry.content for h in store.search(token))


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_an_unreadable_fragment_is_isolated_and_its_memories_named(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    batches = _three_checkpoints(data)
    first = _data_files(data)[0]  # batch 1's fragment
    _no_other_copy(data)
    original = first.read_bytes()
    if damage == "missing":
        first.unlink()
    else:
        first.write_bytes(original[:100])

    with caplog.at_level(logging.ERROR):
        store = LongTermStore(data)
    # the other memories are served and searchable; batch 1 is named as lost, exactly
    assert {e.id for e in store.entries()} == set(batches[1] + batches[2])
    assert _found(store, "tok1x7") and _found(store, "tok2x3") and not _found(store, "tok0x5")
    report = _report(data)
    assert report["unreadable_fragments"] == [0] and report["rows_in_them"] == 20
    assert report["lost"] == sorted(batches[0])
    assert report["restored_from_log"] == []
    assert "1 unreadable LanceDB fragment(s) (20 rows)" in caplog.text
    assert "20 could not be and are lost" in caplog.text
    if damage == "truncated":  # the damaged file is kept, byte for byte, and named
        kept = data / "damaged" / first.name
        assert report["files_kept"] == [str(kept)] and kept.read_bytes() == original[:100]
        assert not first.exists()
    # writes work again (checkpoints included) and a reopened store finds nothing new to report
    new = store.save("written after the damage tokafter", category="t").entry.id
    assert store.checkpoint()
    again = LongTermStore(data)
    assert {e.id for e in again.entries()} == set(batches[1] + batches[2] + [new])
    assert _found(again, "tokafter")
    assert len(list((data / "damaged").glob("longterm-*.json"))) == 1


def test_doctor_names_the_damage_and_what_was_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    _three_checkpoints(data)
    _no_other_copy(data)
    _data_files(data)[0].unlink()
    assert exit_code("doctor", "--data-dir", str(data), "--embedder", "none") == 1
    out = capsys.readouterr().out
    assert "0 memories restored from the snapshot and the log, 20 lost (no copy held them)" in out
    assert str(next((data / "damaged").glob("longterm-*.json"))) in out


def test_a_deleted_newest_manifest_is_detected_and_restored_from_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The bug: LanceDB silently served the previous version, so the last checkpoint's
    memories vanished (and the index was 'repaired' to match). The log still has them."""
    data = tmp_path / "data"
    batches = _three_checkpoints(data)
    _manifests(data)[0].unlink()
    with caplog.at_level(logging.ERROR):
        store = LongTermStore(data)
    assert {e.id for e in store.entries()} == {i for b in batches for i in b}
    assert _found(store, "tok2x9")
    report = _report(data)
    assert report["restored_from_log"] == sorted(batches[2]) and report["lost"] == []
    assert "its newest manifest is missing" in caplog.text


def test_versions_lost_beyond_the_log_are_named(tmp_path: Path) -> None:
    """Two checkpoints' manifests gone: the newest is restored from the log, the one before
    it (its log segment dropped here) is named by id from the state's journal."""
    data = tmp_path / "data"
    batches = _three_checkpoints(data)
    (data / "wal" / f"{21:020d}.log").unlink()
    for manifest in _manifests(data)[:2]:
        manifest.unlink()
    store = LongTermStore(data)
    assert {e.id for e in store.entries()} == set(batches[0] + batches[2])
    report = _report(data)
    assert report["restored_from_log"] == sorted(batches[2])
    assert report["lost"] == sorted(batches[1])


async def test_working_memory_and_other_memories_survive_a_damaged_fragment(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    settings = Settings(data_dir=data, embedder="none", namespace="patrol/damage")
    async with Client(build_server(settings)) as client:
        await ok(client, "save_to_working_memory", key="plan", data="keep me", ttl_minutes=60)
    batches = _three_checkpoints(data)
    (data / "wal" / f"{21:020d}.log").unlink()  # batch 2's only other copy
    _data_files(data)[1].unlink()  # batch 2's fragment
    async with Client(build_server(settings)) as client:
        assert "keep me" in await ok(client, "get_from_working_memory", key="plan")
        assert "tok0x4" in await ok(client, "search_memory", query="tok0x4")
        assert "tok2x4" in await ok(client, "search_memory", query="tok2x4")
        assert "No memories" in await ok(client, "search_memory", query="tok1x4")
        await ok(client, "save_memory", content="still saving tokstill", category="t")
        assert "tokstill" in await ok(client, "search_memory", query="tokstill")
    assert _report(data)["lost"] == sorted(batches[1])

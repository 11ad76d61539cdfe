"""The issue's cases: a store of 600 memories in 3 checkpointed batches, the LanceDB data file
of batch 0 damaged in place (footer, middle, header overwritten at the same size; truncated;
missing). Opening checks each data file against the size and CRC-32 recorded when it was
written, so LanceDB never reads the damaged one: it is kept aside under `damaged/`, the other
400 are served, and batch 0 is restored from the snapshot and the log. Vectors the log no
longer holds are counted missing and re-embedded by the backfill; `doctor` and `export` work
and say what happened."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from tests.support.cli import exit_code
from tests.support.embedders import HashEmbedder

LANCE = Path("lancedb") / "memories.lance"
BATCH = 200


def _store(data: Path) -> list[list[str]]:
    store = LongTermStore(data, embedder=HashEmbedder(), embed_on_save=True)
    batches = []
    for b in range(3):
        batch = [
            store.save(f"fact batch{b} item{i} tok{b}x{i}", category="t").entry.id
            for i in range(BATCH)
        ]
        assert store.checkpoint()
        batches.append(batch)
    return batches


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[str]]]:
    data = tmp_path_factory.mktemp("populated") / "data"
    return data, _store(data)


def _copy(populated: tuple[Path, list[list[str]]], tmp_path: Path) -> Path:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(populated[0], data)
    return data


def _first_data_file(data: Path) -> Path:
    files = (data / LANCE / "data").glob("*.lance")
    return min(files, key=lambda p: p.stat().st_mtime_ns)


def damage(path: Path, kind: str) -> bytes:
    """Damage `path` in place; returns its bytes after."""
    raw = bytearray(path.read_bytes())
    middle = len(raw) // 2
    if kind == "footer8":
        raw[-8:] = bytes(8)
    elif kind == "footer1k":
        raw[-1024:] = bytes(1024)
    elif kind == "middle":
        raw[middle : middle + 1024] = b"\xa5" * 1024
    elif kind == "header":
        raw[:1024] = bytes(1024)
    elif kind == "truncated":
        raw = raw[: len(raw) // 3]
    path.write_bytes(bytes(raw))
    return bytes(raw)


def _report(data: Path) -> dict[str, object]:
    reports = list((data / "damaged").glob("longterm-*.json"))
    assert len(reports) == 1, reports
    parsed: dict[str, object] = json.loads(reports[0].read_text())
    return parsed


@pytest.mark.parametrize("kind", ["footer8", "footer1k", "middle", "header", "truncated"])
def test_a_damaged_data_file_is_kept_aside_and_its_memories_restored(
    populated: tuple[Path, list[list[str]]],
    tmp_path: Path,
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = _copy(populated, tmp_path)
    batches = populated[1]
    file = _first_data_file(data)
    after = damage(file, kind)
    with caplog.at_level(logging.ERROR):
        store = LongTermStore(data, embedder=HashEmbedder())
    assert {e.id for e in store.entries()} == {i for b in batches for i in b}
    for token in ("tok0x5", "tok0x199", "tok1x7", "tok2x3"):
        assert any(token in h.entry.content for h in store.search(token)), token
    report = _report(data)
    assert report["lost"] == [] and report["restored"] == sorted(batches[0])
    kept = data / "damaged" / file.name
    assert report["files_kept"] == [str(kept)] and kept.read_bytes() == after
    assert f"{file.name} is damaged" in caplog.text
    assert "200 memories were restored from the snapshot and the write-ahead log" in caplog.text
    # the log still held batch 0's vectors: none to recompute
    store.load_vectors()
    assert store.missing_vectors() == 0
    # writes and checkpoints work, and a reopened store has nothing new to report
    store.save("after the damage tokafter", category="t")
    assert store.checkpoint()
    again = LongTermStore(data, embedder=HashEmbedder())
    assert len(again.entries()) == 3 * BATCH + 1
    assert len(list((data / "damaged").glob("longterm-*.json"))) == 1


def test_vectors_no_copy_holds_are_counted_and_re_embedded(
    populated: tuple[Path, list[list[str]]], tmp_path: Path
) -> None:
    """Batch 0's log segment is gone too: its records come from the snapshot, without
    vectors; they are counted missing, and the backfill embeds them."""
    data = _copy(populated, tmp_path)
    (data / "wal" / f"{1:020d}.log").unlink()
    damage(_first_data_file(data), "middle")
    store = LongTermStore(data, embedder=HashEmbedder())
    assert len(store.entries()) == 3 * BATCH
    assert _report(data)["restored_from_snapshot"] == sorted(populated[1][0])
    store.load_vectors()
    assert store.missing_vectors() == BATCH
    while store.backfill(batch=64):
        pass
    assert store.missing_vectors() == 0


def test_doctor_and_export_on_a_damaged_store(
    populated: tuple[Path, list[list[str]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _copy(populated, tmp_path)
    damage(_first_data_file(data), "footer8")
    out_file = tmp_path / "export.jsonl"
    assert exit_code("export", "--data-dir", str(data), "--output", str(out_file)) == 0
    assert "exported 600 memories" in capsys.readouterr().err
    lines = out_file.read_text().splitlines()
    assert len(lines) == 3 * BATCH
    assert exit_code("doctor", "--data-dir", str(data), "--embedder", "none") == 1
    out = capsys.readouterr().out
    assert "200 memories restored from the snapshot and the log, 0 lost" in out
    assert "damaged files kept aside: " in out


def test_export_names_what_no_copy_held(
    populated: tuple[Path, list[list[str]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _copy(populated, tmp_path)
    (data / "wal" / f"{1:020d}.log").unlink()
    (data / "longterm.snapshot.gz").unlink()
    damage(_first_data_file(data), "footer1k")
    assert (
        exit_code("export", "--data-dir", str(data), "--output", str(tmp_path / "out.jsonl")) == 0
    )
    err = capsys.readouterr().err
    assert "exported 400 memories" in err
    assert "200 memories were lost to a damaged file and are not exported" in err

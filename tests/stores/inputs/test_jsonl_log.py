"""The JSONL logs: typed errors with sentences, damaged lines kept, a failed recall-log write
never fails a search."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.stores import RECALL, InvalidInput, JsonlLog, StoreBusy, WriteFailed
from tests.support.calls import ok

pytestmark = pytest.mark.anyio


def test_an_oversized_or_unencodable_record_is_invalid_input(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path, "feedback.jsonl")
    with pytest.raises(InvalidInput, match="limited to 65536 characters"):
        log.append({"detail": "x" * 70_000})
    with pytest.raises(InvalidInput, match="valid Unicode"):
        log.append({"detail": "\ud800"})
    assert not log.path.exists()


def test_a_lock_held_by_another_process_is_store_busy(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path, "feedback.jsonl", lock_timeout=0.05)
    with (
        FileLock(str(tmp_path / ".feedback.jsonl.lock")),
        pytest.raises(StoreBusy, match="try again"),
    ):
        log.append({"detail": "x"})


def test_a_failed_write_is_write_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = JsonlLog(tmp_path, "feedback.jsonl")

    def full(*_args: object) -> int:
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(WriteFailed, match="free space"):
        log.append({"detail": "x"})


def test_damaged_lines_are_skipped_on_read_and_kept_aside_on_take(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path, "feedback.jsonl")
    log.append({"detail": "first"})
    with open(log.path, "ab") as fh:
        fh.write(b'{"torn": \n\xff\xfe\n[1, 2]\n')
    log.append({"detail": "last"})
    original = log.path.read_bytes()
    assert [r["detail"] for r in log.read()] == ["first", "last"]
    assert [r["detail"] for r in log.take()] == ["first", "last"]
    assert not log.path.exists()
    (aside,) = tmp_path.glob("feedback.jsonl.corrupt-*")
    assert aside.read_bytes() == original
    assert log.take() == []


def test_a_clean_log_is_emptied_by_take(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path, "feedback.jsonl")
    log.append({"detail": "only"})
    assert [r["detail"] for r in log.take()] == ["only"]
    assert not log.path.exists() and not list(tmp_path.glob("*.corrupt-*"))


async def test_a_search_succeeds_when_the_recall_log_cannot_be_written(
    client: Client, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    await ok(client, "save_memory", content="The deploy window is Tuesday")
    (settings.data_dir / RECALL).mkdir()  # appending to it fails with EISDIR
    found = await ok(client, "search_memory", query="deploy")
    assert "The deploy window is Tuesday" in found
    assert "not recorded in the recall log" in caplog.text

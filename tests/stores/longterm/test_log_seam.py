"""The store reaches its durable log only through the `Log` interface (stores/longterm/log.py): a
second implementation, kept in memory here, carries saves, deletes, catch-up between two
stores, checkpoints and a reader that lagged behind dropped records, and nothing is written
to the write-ahead log's files or its lock."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.errors import StoreUnreachable
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm.log import Log, LogGap, Op, Record


class Shared:
    """What the processes share: the records, where segments start, the writers' lock."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.segments = [1]  # first seq of each segment; records before segments[0] dropped
        self.lock = threading.RLock()
        self.appends = 0

    @property
    def last(self) -> int:
        return self.records[-1].seq if self.records else self.segments[0] - 1


class MemoryLog:
    """One reader and writer of a `Shared` log."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.last_seq = 0

    def start_at(self, seq: int) -> None:
        self.last_seq = seq

    def first_seq(self) -> int:
        return self.shared.segments[0]

    def has_news(self) -> bool:
        return self.shared.last != self.last_seq

    def read_new(self) -> list[Record]:
        if self.last_seq + 1 < self.shared.segments[0]:
            raise LogGap(f"records {self.last_seq + 1}.. were dropped")
        new = [r for r in self.shared.records if r.seq > self.last_seq]
        if new:
            self.last_seq = new[-1].seq
        return new

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self.shared.lock:
            yield

    def append(self, batches: Sequence[Sequence[Op]]) -> int:
        assert self.last_seq == self.shared.last, "a writer reads to the end first"
        for ops in batches:
            self.shared.records.append(Record(self.shared.last + 1, list(ops)))
        self.shared.appends += 1
        return self.shared.last

    def rotate(self) -> int:
        if self.shared.segments[-1] != self.shared.last + 1:
            self.shared.segments.append(self.shared.last + 1)
        return self.shared.last + 1

    def sealed_records(self, after: int, through: int) -> Iterator[Record]:
        return iter([r for r in self.shared.records if after < r.seq <= through])

    def drop_sealed(self, through: int) -> None:
        starts = self.shared.segments
        done = [s for i, s in enumerate(starts[:-1]) if starts[i + 1] - 1 <= through]
        if len(done) > 1:  # keep the newest folded segment for readers a little behind
            keep = done[-1]
            self.shared.segments = [s for s in starts if s >= keep]
            self.shared.records = [r for r in self.shared.records if r.seq >= keep]


def open_store(tmp_path: Path, shared: Shared) -> LongTermStore:
    log: Log = MemoryLog(shared)
    return LongTermStore(tmp_path, log=log)


def test_a_second_log_carries_saves_deletes_checkpoints_and_catch_up(tmp_path: Path) -> None:
    shared = Shared()
    writer, reader = open_store(tmp_path, shared), open_store(tmp_path, shared)
    first = writer.save("the harbour opens at dawn").entry
    assert [h.entry.id for h in reader.search("harbour")] == [first.id]  # tailed the log
    assert writer.save("The harbour opens at DAWN").reinforced  # the duplicate check
    assert writer.checkpoint() and writer.pending() == 0
    doomed = writer.save("the lighthouse keeper retires").entry
    writer.delete(doomed.id)
    assert reader.get(doomed.id) is None and reader.count() == 1
    assert shared.appends == 4  # one append per commit: save, reinforce, save, delete
    assert not list((tmp_path / "wal").glob("*.log")) and not (tmp_path / "write.lock").exists()
    reopened = open_store(tmp_path, shared)  # from LanceDB at the checkpoint, then the log
    assert [e.content for e in reopened.entries()] == ["the harbour opens at dawn"]


def test_a_reader_behind_dropped_records_recovers_them_from_lancedb(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # records are dropped once a snapshot covers them: one at every checkpoint here
    monkeypatch.setattr(snapshot, "SNAPSHOT_EVERY", 1)
    shared = Shared()
    writer, lagging = open_store(tmp_path, shared), open_store(tmp_path, shared)
    saved = []
    for i in range(4):  # each checkpoint seals a segment; the oldest ones are dropped
        saved.append(writer.save(f"tide table for week {i}").entry.id)
        assert writer.checkpoint()
    assert shared.segments[0] > 1, "records the lagging store never read were dropped"
    with caplog.at_level(logging.INFO, logger="dreamwell.stores.longterm.catchup"):
        found = {h.entry.id for h in lagging.search("tide table")}
    assert "catching up from LanceDB" in caplog.text  # the gap was heard, not skipped
    assert found == set(saved)
    assert lagging.pending() == 0


class ReadBackFails(MemoryLog):
    """A log whose first read after an append fails, as an object store that stops answering
    right after acknowledging a commit does."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self.fail_next_read = False

    def append(self, batches: Sequence[Sequence[Op]]) -> int:
        self.fail_next_read = True
        return super().append(batches)

    def read_new(self) -> list[Record]:
        if self.fail_next_read:
            self.fail_next_read = False
            raise StoreUnreachable("cannot read the log in s3://away: the store does not answer")
        return super().read_new()


def test_a_save_in_the_log_is_acknowledged_when_reading_it_back_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The save's records were in the log, yet the failed read-back after the append was
    handed to the caller as the save's error: a client told "nothing was saved" retried, and
    a replica counted the memory its writer had refused (seen as a count that never matched
    in the shared log's compaction race)."""
    shared = Shared()
    store = LongTermStore(tmp_path, log=ReadBackFails(shared))
    with caplog.at_level(logging.WARNING, logger="dreamwell.stores.longterm.group_commit"):
        saved = store.save("the ferry leaves at nine").entry
    assert "saved, but reading the log back failed" in caplog.text
    assert len(shared.records) == 1
    assert store.get(saved.id) is not None  # the next read took it
    assert store.count() == 1

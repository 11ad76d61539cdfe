"""The shared log's generations on object storage (SeaweedFS on 127.0.0.1), with a
generation of 4 appends so a few dozen saves cross many of them.

Issue 45: one log table for ever slowed with its age (save p50 1.7x over 19,000 saves while
its rows stayed bounded), so appends now start a fresh table every ROLL_EVERY. What is
provoked: replicas racing across generation boundaries (nothing lost, nothing twice); whole
generations dropped once a stored snapshot covers them (a new replica still gets everything);
a replica that had read only into a generation dropped since, which must hear the gap from
its poller and reload, not wait on a table that is gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from dreamwell.stores.errors import StoreBusy, StoreUnreachable
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm.lance_table import LogTable
from dreamwell.stores.longterm.log import LogConflict, LogGap
from dreamwell.stores.longterm.shared import log as lancelog
from dreamwell.stores.longterm.shared import tables as log_tables
from dreamwell.stores.longterm.shared import tidy
from dreamwell.stores.longterm.shared.tables import LogTables, table_name
from dreamwell.stores.longterm.store import LongTermStore
from tests.support.racing import eventually, race_saves
from tests.support.s3server import SeaweedS3

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture(autouse=True)
def small_generations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_tables, "ROLL_EVERY", 4)


def names(log: lancelog.LanceLog) -> list[str]:
    return [table_name(g) for g in LogTables(log.remote).listed()]


def generations(store: LongTermStore) -> list[int]:
    log = store._wal
    assert isinstance(log, lancelog.LanceLog)
    return LogTables(log.remote).live()


def saved(
    replica: Callable[..., LongTermStore], count: int
) -> tuple[LongTermStore, lancelog.LanceLog]:
    """A replica with `count` memories saved one by one (one append each), and its log."""
    store = replica()
    for i in range(count):
        store.save(f"memory number {i} about gardening", "garden")
    log = store._wal
    assert isinstance(log, lancelog.LanceLog)
    return store, log


def test_replicas_racing_across_generations_lose_nothing_and_write_nothing_twice(
    replica: Callable[..., LongTermStore],
) -> None:
    stores = [replica(), replica()]
    acknowledged, refused = race_saves(stores, 12, threads=1)
    assert all(isinstance(e, (StoreBusy, StoreUnreachable)) for e in refused), refused
    assert len(acknowledged) >= 20
    assert len(generations(stores[0])) >= 3  # the appends went to several tables
    late = replica()  # reads every generation from the first
    for store in [*stores, late]:
        eventually(lambda s=store: s.count() == len(acknowledged), within=10.0)  # type: ignore[misc]
        assert {e.id for e in store.entries()} == set(acknowledged)


def test_the_next_generation_is_begun_halfway_through_this_one_by_one_replica(
    replica: Callable[..., LongTermStore],
) -> None:
    """Every replica whose append was a generation's first created its table: a create that
    lost that race was committed as an Overwrite of the winner's table (13 saves of a 20,000-
    save run through three replicas failed on it), and an Overwrite is compatible with an
    append committed before it. The replica that landed the generation's middle append now
    begins the next table, two appends (of four) before any append needs it."""
    store, log = saved(replica, 2)
    assert table_name(1) not in names(log)
    store.save("the third, the middle of the first generation", "garden")
    assert table_name(1) in names(log)  # begun, empty, before append 5
    for i in range(3):
        store.save(f"one of the next generation {i}", "garden")
    late = replica()
    assert late.count() == store.count() == 6 and len(generations(store)) == 2


def test_an_append_that_met_another_replicas_create_of_its_table_is_decided_again(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The growth run's failed saves: "Incompatible transaction: This Update transaction is
    incompatible with concurrent transaction Overwrite at version 2" (another replica's create
    of the same table, committed as an Overwrite). Nothing landed: a lost race, not a store
    that failed; the save goes again and is acknowledged."""
    store, log = saved(replica, 1)
    real = LogTable.insert_if_absent
    raised: list[int] = []

    def overwritten_once(table: LogTable, row: dict[str, Any]) -> tuple[bool, int]:
        if not raised:
            raised.append(row["n"])
            raise OSError(
                "lance error: Incompatible transaction: This Update transaction is incompatible"
                " with concurrent transaction Overwrite at version 2., conflict_resolver.rs"
            )
        return real(table, row)

    monkeypatch.setattr(LogTable, "insert_if_absent", overwritten_once)
    entry = store.save("saved after a lost race", "garden").entry
    assert raised == [2] and log.conflicts == 1
    assert replica().get(entry.id) is not None


def test_generations_a_stored_snapshot_covers_are_dropped_whole(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "SNAPSHOT_EVERY", 20)
    monkeypatch.setattr(lancelog, "KEEP_RECORDS", 5)
    a = replica()
    kept = [a.save(f"memory number {i} about gardening", "garden").entry.id for i in range(40)]
    assert max(generations(a)) >= 9  # 40 appends of one save each, 4 to a table
    assert a.checkpoint()
    left = generations(a)
    # gone: every table whose records the snapshot covers; kept: the ones holding the last
    # KEEP_RECORDS records below the cut and what came after it
    assert left[0] > 0 and left == list(range(left[0], left[-1] + 1)) and len(left) <= 3, left
    assert a._wal.first_seq() > 1
    b = replica()  # a new cache: the snapshot, then the generations left
    assert {e.id for e in b.entries()} == set(kept)
    later = a.save("saved after the new replica opened", "garden")
    eventually(lambda: b.get(later.entry.id) is not None)


def test_a_replica_whose_generation_was_dropped_hears_the_gap_and_reloads(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """b read the first append and opened its table; then a's saves and checkpoint dropped
    that table. b's poller must see the newer generations as news, and its next read hear
    the gap (and reload from the snapshot) rather than fail on, or wait at, a table gone."""
    monkeypatch.setattr(snapshot, "SNAPSHOT_EVERY", 20)
    monkeypatch.setattr(lancelog, "KEEP_RECORDS", 5)
    a, b = replica(), replica()
    first = b.save("b was here first", "garden").entry.id
    kept = [a.save(f"memory number {i} about gardening", "garden").entry.id for i in range(40)]
    assert a.checkpoint()
    assert 0 not in generations(a)  # the table b read from is gone
    eventually(lambda: b.count() == len(kept) + 1, within=15.0)
    assert {e.id for e in b.entries()} == {first, *kept}
    later = b.save("b saves on after reloading", "garden")
    eventually(lambda: a.get(later.entry.id) is not None)


def test_a_table_another_replica_drops_while_this_one_reads_it_is_passed_over(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the 20,000-save growth run: every replica's checkpoint drops what its snapshot
    covers, so one replica's trim read a table another had just dropped and failed ("cannot
    trim the log ...: Not found: log-3.lance/_versions/...manifest"), killing that
    checkpoint. Here another replica drops each of the two oldest tables right before this
    one reads it: the first seq, the trim and a reader starting there all go on past them."""
    monkeypatch.setattr(lancelog, "KEEP_RECORDS", 5)
    a, log = saved(replica, 20)
    other = LogTables(log.remote)  # another replica's handles on the same tables
    real_extreme = LogTable.extreme
    dropped: list[str] = []

    def dropped_first(table: LogTable, column: str, low: bool) -> int | None:
        name = table._table.name
        if name not in dropped and name in ("log", "log-1"):
            dropped.append(name)
            other.drop(0 if name == "log" else 1)
        return real_extreme(table, column, low)

    monkeypatch.setattr(LogTable, "extreme", dropped_first)
    assert log.first_seq() == 9  # the first record of log-2: log and log-1 went meanwhile
    assert sorted(dropped) == ["log", "log-1"]
    log.drop_sealed(20)
    assert generations(a) == [3, 4, 5] and log.first_seq() == 16  # 5: begun at append 19
    late = lancelog.LanceLog(log.remote)  # a reader from the start hears the gap
    late.start_at(0)
    with pytest.raises(LogGap):
        late.read_new()
    late.close()


def test_a_read_of_a_version_cleaned_up_meanwhile_is_tried_once_more_afresh(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The growth run again: a replica's trim failed with "Not found: log-8.lance/_versions/
    ...manifest" on a table that still existed (a version it had checked out was removed by a
    compaction's cleanup). Such a read is tried again on a fresh handle."""
    _, log = saved(replica, 6)
    real_extreme = LogTable.extreme
    raised: list[str] = []

    def cleaned_up_once(table: LogTable, column: str, low: bool) -> int | None:
        if not raised:
            raised.append(column)
            raise OSError("Not found: t/log.lance/_versions/18446744073709550333.manifest")
        return real_extreme(table, column, low)

    monkeypatch.setattr(LogTable, "extreme", cleaned_up_once)
    assert log.first_seq() == 1 and raised == ["first"]


def test_a_trim_the_store_refuses_keeps_the_records_for_the_next_checkpoint(
    replica: Callable[..., LongTermStore],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A trim is a checkpoint's last step: its failing failed the whole checkpoint (and, in
    the growth run, the thread that asked for it) though everything was folded and recorded.
    Now what could not be dropped stays in the log, and the next checkpoint drops it."""
    monkeypatch.setattr(lancelog, "KEEP_RECORDS", 5)
    a, log = saved(replica, 20)
    real_delete = LogTable.delete

    def refused(table: LogTable, where: str) -> None:
        raise OSError("Generic S3 error: connection reset by peer")

    monkeypatch.setattr(LogTable, "delete", refused)
    log.drop_sealed(18)  # below 13: log, log-1, log-2 dropped; log-3's rows <= 13 not
    assert "the next checkpoint tries again" in caplog.text
    assert generations(a) == [3, 4, 5] and log.first_seq() == 13  # 5: begun at append 19
    monkeypatch.setattr(LogTable, "delete", real_delete)
    log.drop_sealed(18)
    assert log.first_seq() == 14


def versions(s3: SeaweedS3, prefix: str, gen: int) -> int:
    """The versions (manifests) generation `gen`'s table holds in the store."""
    import obstore

    found = obstore.list(s3.store(f"{prefix}/{table_name(gen)}.lance/_versions")).collect()
    return len(found)


def test_a_full_generation_and_a_quiet_log_keep_only_their_last_versions(
    replica: Callable[..., LongTermStore],
    s3: SeaweedS3,
    s3_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 57: 1,200 saves left ~960 objects (18 KB a memory): every version of a log table
    costs ~66 KB (its manifest and transaction file each carry the merge_insert's 32 KB key
    filter), and versions were removed only after COMPACT_EVERY more appended to the same
    table. A table the log had moved on from, and a log at rest, kept their last versions
    until a checkpoint dropped the table. Now a full generation and the newest table of a
    quiet log are compacted and cleaned up to the compaction's versions, and nothing is lost."""
    monkeypatch.setattr(tidy, "KEEP_VERSIONS", timedelta(seconds=0.5))
    a, b = replica(), replica()
    kept = [a.save(f"memory number {i} about gardening", "garden").entry.id for i in range(6)]
    kept += [b.save(f"b's memory {i} about gardening", "garden").entry.id for i in range(5)]
    assert generations(a) == [0, 1, 2, 3]  # appends 1-4, 5-8 and 9-11; 3 begun at 11
    assert versions(s3, s3_prefix, 0) >= 4  # one per append, and the table's creation
    # a compaction commits twice (its fragments reserved, then the rewrite): two small versions
    eventually(lambda: all(versions(s3, s3_prefix, g) <= 2 for g in (0, 1, 2)), within=10.0)
    late = replica()  # everything is still there, read from the first table on
    for store in (a, b, late):
        eventually(lambda s=store: {e.id for e in s.entries()} == set(kept))  # type: ignore[misc]


def test_a_replica_reading_while_another_compacts_and_cleans_up_reads_afresh(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window a short KEEP_VERSIONS opens: a replica checks out a version of a log table,
    another appends, compacts and removes every version but its latest before the first reads
    the rows; the data files that version named are gone ("Not found: .../data/...lance").
    That read is tried again afresh and gets every row, the new one too."""
    a, log_a = saved(replica, 2)
    late = lancelog.LanceLog(log_a.remote)  # a replica that has read nothing of it yet
    other = LogTables(log_a.remote)
    real_rows = LogTable.rows
    meanwhile: list[str] = []
    reader = threading.current_thread()  # not a replica's own catch-up thread

    def compacted_first(table: LogTable, where: str, *args: Any) -> list[dict[str, Any]]:
        if not meanwhile and threading.current_thread() is reader:
            meanwhile.append(a.save("saved while the other was reading", "garden").entry.id)
            other.read(0, lambda t, _: t.compact(timedelta(0)))
        return real_rows(table, where, *args)

    monkeypatch.setattr(LogTable, "rows", compacted_first)
    late.start_at(0)
    assert [r.seq for r in late.read_new()] == [1, 2, 3] and meanwhile
    late.close()


def _removed(*_: object) -> bool:
    raise OSError("Not found: log/0.lance/_versions/7.manifest")


@pytest.mark.parametrize(
    "insert", ["fresh base", "slow insert", "slow insert, its check on a removed version"]
)
def test_an_append_on_a_version_cleaned_up_meanwhile_does_not_take_a_number_taken(
    replica: Callable[..., LongTermStore], monkeypatch: pytest.MonkeyPatch, insert: str
) -> None:
    """The three-replica race's duplicate: a replica read the log (its handle checked out
    version V), then another appended the next number and compacted, removing every version
    older than KEEP_VERSIONS. LanceDB commits an insert on a removed base without seeing the
    insert of the same key in between (a second row with that number, both appends
    acknowledged: one fact saved twice on two replicas). The append checks out the table
    again first when its handle is older than that, so it finds the number taken; and one
    whose insert took a keep-time from its base (here: never checked out again) sees the row
    before its own in the version it made, takes its own out and hears LogConflict. Should
    that look (`_alone`) itself read a removed version, the append asks whether its row
    landed after all (`_landed`), which must not say yes beside another replica's row."""
    if insert != "fresh base":
        monkeypatch.setattr(lancelog, "FRESH_BASE", float("inf"))
    if insert.endswith("removed version"):
        monkeypatch.setattr(lancelog.LanceLog, "_alone", _removed)
    _, log = saved(replica, 1)
    first, second = lancelog.LanceLog(log.remote), lancelog.LanceLog(log.remote)
    for each in (first, second):
        each.start_at(0)
        assert [r.seq for r in each.read_new()] == [1]
    time.sleep(tidy.KEEP_VERSIONS.total_seconds() + 0.2)  # quiet: V is older than the keep
    first.append([[{"op": "note", "by": "first"}]])
    time.sleep(tidy.KEEP_VERSIONS.total_seconds() + 0.2)
    LogTables(log.remote).read(0, lambda t, _: t.compact(tidy.KEEP_VERSIONS))
    with pytest.raises(LogConflict):
        second.append([[{"op": "note", "by": "second"}]])
    rows = LogTables(log.remote).read(0, lambda t, _: t.rows("n = 2", ("n", "body")))
    assert rows is not None and [r["body"] for r in rows] == ['[[{"op":"note","by":"first"}]]']
    assert [r.ops for r in second.read_new()] == [[{"op": "note", "by": "first"}]]
    for each in (first, second):
        each.close()


def test_a_reader_that_meets_two_rows_of_one_number_takes_the_records_once(
    replica: Callable[..., LongTermStore],
) -> None:
    """Should a second row of one append number stand in the log (LanceDB's insert on a
    removed version, before its writer took it out again), a reader applies one of them, not
    both: each record once, in order."""
    _, log = saved(replica, 1)
    row = {"n": 2, "first": 2, "last": 2, "at": time.time(), "body": '[[{"op":"note","k":1}]]'}
    tables = LogTables(log.remote)
    table = tables.get(0)
    assert table is not None
    for body in ('[[{"op":"note","k":1}]]', '[[{"op":"note","k":2}]]'):
        table._table.add([{**row, "body": body}])  # past merge_insert: a second row of n 2
    reader = lancelog.LanceLog(log.remote)
    reader.start_at(0)
    records = reader.read_new()
    assert [r.seq for r in records] == [1, 2]
    assert records[1].ops in ([{"op": "note", "k": 1}], [{"op": "note", "k": 2}])
    reader.close()

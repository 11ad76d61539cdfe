"""The long-term store's core: the write-ahead log, checkpoints, snapshot reads, group commit
and compare-and-set writes — each window where a write can land between two steps."""

from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dreamwell.stores import ANY, LongTermStore, StoreError, Write
from dreamwell.stores.index.relevance import REFERENCES
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm import wal as wal_module
from dreamwell.stores.longterm.wal import Wal
from tests.support.embedders import Counting, HashEmbedder


def ids(hits: list) -> set[str]:  # type: ignore[type-arg]
    return {h.entry.id for h in hits}


def test_a_save_is_searchable_before_and_after_its_checkpoint(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    first = store.save("the harbour opens at dawn").entry
    assert store.pending() == 1 and ids(store.search("harbour")) == {first.id}
    assert store.checkpoint()
    assert store.pending() == 0 and ids(store.search("harbour")) == {first.id}
    second = store.save("the harbour closes at dusk").entry
    assert ids(store.search("harbour")) == {first.id, second.id}
    reopened = LongTermStore(tmp_path)
    assert ids(reopened.search("harbour")) == {first.id, second.id}


def test_pending_deletes_and_edits_override_the_checkpointed_index(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    gone = store.save("a lighthouse keeper named Ada", tags="people").entry
    kept = store.save("a lighthouse on the cliff", tags="places").entry
    store.checkpoint()
    store.delete(gone.id)
    store.apply([replace(kept, tags=("moved",))])
    assert ids(store.search("lighthouse")) == {kept.id}
    assert store.search("lighthouse", tags="places") == []
    assert ids(store.search("lighthouse", tags="moved")) == {kept.id}
    assert ids(LongTermStore(tmp_path).search("lighthouse", tags="moved")) == {kept.id}


def test_compare_and_set_never_brings_back_a_deleted_entry(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    planned = store.save("user likes green tea").entry  # the snapshot a plan was made from
    other = store.save("user likes black coffee").entry
    LongTermStore(tmp_path).delete(planned.id)  # the user deletes it meanwhile (another store)
    decayed = replace(planned, importance=0.2)
    done = store.write(
        [[Write(planned.id, planned, decayed)], [Write(other.id, other, replace(other, score=1.0))]]
    )
    assert done == [False, True]
    assert store.get(planned.id) is None and store.get(other.id).score == 1.0  # type: ignore[union-attr]
    assert LongTermStore(tmp_path).get(planned.id) is None


def test_a_group_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    a = store.save("fact a").entry
    b = store.save("fact b").entry
    store.apply([replace(b, importance=0.9)])  # b changed after the plan saw it
    merged = replace(a, id="0123456789ab", content="fact a and b")
    group = [
        Write(merged.id, None, merged),
        Write(a.id, a, replace(a, archived_at=a.created_at)),
        Write(b.id, b, replace(b, archived_at=b.created_at)),
    ]
    assert store.write([group]) == [False]
    assert store.get(merged.id) is None and store.get(a.id) == a
    assert store.write([[Write(a.id, ANY, None)]]) == [True] and store.get(a.id) is None


def test_a_torn_tail_left_by_a_crashed_writer_is_cut_and_the_log_goes_on(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    before = store.save("before the crash").entry
    segment = Wal(tmp_path / "wal").path(Wal(tmp_path / "wal").segments()[-1])
    with open(segment, "ab") as fh:
        fh.write(b'1234abcd {"s": 99, "ops": [{"op": "put", "e"')  # no newline: torn
    after = LongTermStore(tmp_path).save("after the crash").entry
    reopened = LongTermStore(tmp_path)
    assert ids(reopened.search("crash")) == {before.id, after.id}
    assert b"1234abcd" not in segment.read_bytes()


def test_a_damaged_record_is_skipped_kept_aside_and_the_rest_is_read(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    first = store.save("first river crossing").entry
    store.save("second river crossing")
    third = store.save("third river crossing").entry
    wal = Wal(tmp_path / "wal")
    segment = wal.path(wal.segments()[-1])
    lines = segment.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"second", b"secXnd")  # a flipped byte: the checksum fails
    segment.write_bytes(b"\n".join(lines))
    reopened = LongTermStore(tmp_path)
    assert ids(reopened.search("river")) == {first.id, third.id}
    assert list((tmp_path / "wal").glob("*.corrupt-*")), "the damaged log must be kept aside"


def test_a_checkpoint_reads_only_the_log_segments_it_folds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 57: the log keeps every segment the snapshot does not cover, and a checkpoint
    parsed all of them again to find the records it folds: at 100,000 memories 160-200 ms of
    a checkpoint's ~250 went to records folded before. Segments wholly folded are skipped."""
    store = LongTermStore(tmp_path)
    for round_ in range(4):  # a segment each: sealed by its checkpoint, kept for the snapshot
        for i in range(5):
            store.save(f"harbour crane {round_}-{i}")
        store.checkpoint()
    wal = Wal(tmp_path / "wal")
    assert len(wal.segments()) >= 4
    every = list(wal.sealed_records(0, 10**9))
    after, through = every[-4].seq, every[-1].seq  # from within the last folded segment
    parsed: list[bytes] = []
    parse = wal_module._parse

    def counted(line: bytes) -> object:
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(wal_module, "_parse", counted)
    read = list(wal.sealed_records(after, through))
    assert [r.seq for r in read] == [r.seq for r in every if r.seq > after]
    last_two = wal.segments()[-2:]
    in_last_two = sum(
        len([line for line in wal.path(first).read_bytes().split(b"\n") if line])
        for first in last_two
    )
    assert len(parsed) <= in_last_two < len(every)


def test_a_reader_behind_deleted_log_segments_catches_up_from_lancedb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # segments are dropped once a snapshot covers them: one at every checkpoint here
    monkeypatch.setattr(snapshot, "SNAPSHOT_EVERY", 1)
    reader = LongTermStore(tmp_path)
    assert reader.search("glacier") == []
    writer = LongTermStore(tmp_path)
    saved = []
    for round_ in range(3):  # three checkpoints: the first segments are deleted
        saved += [writer.save(f"glacier walk {round_}-{i}").entry.id for i in range(5)]
        writer.checkpoint()
    assert len(Wal(tmp_path / "wal").segments()) <= 2
    deleted = writer.save("glacier walk to be deleted").entry.id
    writer.delete(deleted)
    assert ids(reader.search("glacier")) == set(saved)


def test_a_checkpoint_that_died_half_way_is_done_again_without_duplicates(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for i in range(10):
        store.save(f"orchard row {i}")
    end = store._wal.last_seq
    store._wal.rotate()
    store._fold(0, end)
    reopened = LongTermStore(tmp_path)
    assert len(reopened.search("orchard")) == 10
    assert reopened.checkpoint()
    assert reopened._table.count() == 10
    assert len(LongTermStore(tmp_path).search("orchard")) == 10


def test_a_failed_log_write_saves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LongTermStore(tmp_path)
    kept = store.save("written before the disk filled").entry

    pwrite = os.pwrite

    def full(fd: int, data: bytes, offset: int) -> int:
        pwrite(fd, data[: len(data) // 2], offset)  # half a record reaches the file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(StoreError, match="nothing was saved"):
        store.save("this one does not fit")
    monkeypatch.undo()
    assert [e.id for e in store.entries()] == [kept.id]
    later = store.save("written after space was freed").entry
    assert {e.id for e in LongTermStore(tmp_path).entries()} == {kept.id, later.id}


def test_concurrent_saves_share_log_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LongTermStore(tmp_path)
    appends = 0
    original = Wal.append

    def counting(self: Wal, batches: list) -> int:  # type: ignore[type-arg]
        nonlocal appends
        appends += 1
        time.sleep(0.01)  # a slow disk: saves pile up behind this write
        return original(self, batches)

    monkeypatch.setattr(Wal, "append", counting)
    threads = [
        threading.Thread(target=store.save, args=(f"parallel save number {i}",)) for i in range(40)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(store.entries()) == 40 and appends < 40
    assert len(LongTermStore(tmp_path).entries()) == 40


def test_an_edited_entry_drops_its_stale_vector_until_it_is_embedded_again(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path, embedder=HashEmbedder())
    entry = store.save("sourdough starter recipe").entry
    assert store.backfill() == 1 and store.missing_vectors() == 0
    store.checkpoint()
    store.apply([replace(entry, content="rye bread recipe")])
    assert store.missing_vectors() == 1
    store.checkpoint()
    fresh = LongTermStore(tmp_path, embedder=HashEmbedder())
    fresh.load_vectors()
    assert fresh.missing_vectors() == 1 and fresh.backfill() == 1


def test_opening_a_store_writes_nothing(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    store.save("a quiet fact")
    store.checkpoint()
    store.save("a pending fact")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    LongTermStore(tmp_path).search("fact")
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before


HOLD_LOCK = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


def test_reads_never_wait_for_another_process_holding_the_write_lock(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path, lock_timeout=30)
    for i in range(50):
        store.save(f"mountain hut {i}")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "write.lock"), "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        waiting = threading.Thread(target=store.save, args=("saved while locked",))
        waiting.start()  # this save waits for the other process; searches must not
        slowest = 0.0
        for _ in range(20):
            started = time.perf_counter()
            assert len(store.search("mountain hut")) == 20
            assert LongTermStore(tmp_path).count() >= 50  # opening does not need the lock
            slowest = max(slowest, time.perf_counter() - started)
        assert waiting.is_alive(), "the save should still be waiting for the lock"
        assert slowest < 1.0, f"a search waited {slowest:.2f} s behind another process's lock"
        waiting.join(30)
        assert store.search("saved while locked")
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()


def test_a_checkpoint_writes_entries_with_and_without_vectors_together(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path, embedder=HashEmbedder())
    with_vector = store.save("kayak rental by the lake").entry
    assert store.backfill() == 1
    without = store.save("kayak lessons on Sunday").entry
    assert store.checkpoint()
    reopened = LongTermStore(tmp_path, embedder=HashEmbedder())
    reopened.load_vectors()
    assert reopened.missing_vectors() == 1
    assert {with_vector.id, without.id} == ids(reopened.search("kayak"))


def test_a_garbage_state_file_is_kept_aside_and_the_log_replayed(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    first = store.save("canal boat trip").entry
    store.checkpoint()
    second = store.save("canal lock keeper").entry
    (tmp_path / "longterm.state").write_text("{not json")
    reopened = LongTermStore(tmp_path)
    assert ids(reopened.search("canal")) == {first.id, second.id}
    assert list(tmp_path.glob("longterm.state.corrupt-*")), "the damaged state must be kept"
    assert reopened.checkpoint() and ids(LongTermStore(tmp_path).search("canal")) == {
        first.id,
        second.id,
    }


def test_a_search_right_after_saves_ranks_with_every_vector_and_the_backfill_still_logs_them(
    tmp_path: Path,
) -> None:
    from dreamwell.stores import OnnxMiniLM

    store = LongTermStore(tmp_path, embedder=OnnxMiniLM(), min_similarity=0.2)
    store.load_vectors()  # what the server does after start-up
    store.save("The user is based in Chicago, Illinois", "user-preferences/location")
    store.save("Deploys happen on Tuesdays", "project-context/release")
    hits = store.search("which city does the person live in")  # no backfill has run yet
    assert hits and hits[0].entry.content.startswith("The user is based in Chicago")
    assert store.missing_vectors() == 2  # embedded for the search, not yet logged
    assert store.backfill() == 2 and store.missing_vectors() == 0
    store.checkpoint()
    reopened = LongTermStore(tmp_path, embedder=OnnxMiniLM())
    reopened.load_vectors()
    assert reopened.missing_vectors() == 0


def test_vectors_come_back_from_lancedb_exactly_across_a_change_of_dimension(
    tmp_path: Path,
) -> None:
    """Vectors are read from the table as matrices (one per length), not as Python floats:
    each comes back bit for bit from LanceDB, and from memory as held (float32 in a store this
    small), with entries of an older model's dimension kept apart."""
    import numpy as np

    old = LongTermStore(tmp_path, embedder=HashEmbedder(name="old", dim=8))
    first = [old.save(f"lake kayak number {i}").entry for i in range(5)]
    assert old.backfill() == 5 and old.checkpoint()
    new = LongTermStore(tmp_path, embedder=HashEmbedder(name="new", dim=4))
    second = [new.save(f"river canoe number {i}").entry for i in range(3)]
    assert new.backfill() == 3 + 5 and new.checkpoint()  # the old five re-embedded too
    kept = new.vectors("new")
    assert set(kept) == {e.id for e in first + second}
    reopened = LongTermStore(tmp_path, embedder=HashEmbedder(name="new", dim=4))
    reopened.load_vectors()
    assert reopened.missing_vectors() == 0
    read = reopened.vectors("new")
    assert set(read) == set(kept)
    for entry_id, vector in read.items():
        assert vector.dtype == np.float32 and vector.shape == (4,)
        assert np.array_equal(vector, kept[entry_id])
    expected = np.asarray(HashEmbedder(dim=4).embed([second[0].content])[0], dtype=np.float32)
    assert np.array_equal(read[second[0].id], expected)
    stored = LongTermStore(tmp_path).vectors("new")  # no embedder: the table's own values
    assert set(stored) == set(kept) and np.array_equal(stored[second[0].id], expected)
    # what a caller holds is a copy: later changes to the store leave it as it was
    before = read[second[0].id].copy()
    reopened.apply([replace(second[0], content="river canoe renamed")])
    reopened.backfill()
    assert np.array_equal(read[second[0].id], before)


def test_stored_vectors_of_mixed_lengths_and_none_are_read_back_per_entry(tmp_path: Path) -> None:
    import numpy as np

    from dreamwell.stores import MemoryEntry, new_id, utcnow
    from dreamwell.stores.longterm.lance_table import MemoryTable, StoredVector
    from dreamwell.stores.model import text_hash

    now = utcnow()
    made = [MemoryEntry(new_id(), f"note {i}", None, (), now, now, now) for i in range(4)]
    values = {made[0].id: [0.5, 1.5, 2.5], made[1].id: [1.0, 2.0, 3.0, 4.0, 5.0]}
    values[made[2].id] = [7.0, 8.0, 9.0]
    table = MemoryTable(tmp_path / "lancedb")
    table.upsert(
        [
            (
                e,
                StoredVector(f"m{len(v)}", v, text_hash(e.content))
                if (v := values.get(e.id))
                else None,
            )
            for e in made
        ]
    )
    got = table.stored_vectors([e.id for e in made])
    assert set(got) == set(values)
    for entry_id, vector in got.items():
        assert np.array_equal(vector.values, np.asarray(values[entry_id], dtype=np.float32))
        assert vector.model == f"m{len(values[entry_id])}"
    assert set(table.vectors("m3")) == {made[0].id, made[2].id}


def test_the_terms_of_pending_entries_are_dropped_once_they_are_checkpointed(
    tmp_path: Path,
) -> None:
    """A search scores entries not yet in the text index from their cached terms; after the
    checkpoint that cache must not keep them (it grew by every entry ever searched while
    pending, for as long as the server ran)."""
    store = LongTermStore(tmp_path)
    for i in range(50):
        store.save(f"pending fact number {i} about kayaks")
    assert len(store.search("kayaks")) == 20
    assert len(store._terms) == 50
    assert store.checkpoint()
    assert len(store.search("kayaks")) == 20
    assert len(store._terms) == 0
    store.save("one more fact about kayaks")
    store.search("kayaks")
    assert len(store._terms) == 1


def test_a_collision_of_the_duplicate_digest_never_merges_two_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The duplicate map keys on a 64-bit digest; a hit is checked against the text. Here
    every text collides."""
    from dreamwell.stores.longterm import operations as ops

    monkeypatch.setattr(ops, "dup_key", lambda category, content, project=None: 7)
    store = LongTermStore(tmp_path)
    first = store.save("The cat sleeps on the sofa", category="pets")
    other = store.save("Rent is due on the first of the month", category="pets")
    again = store.save("the cat sleeps on the SOFA", category="pets")  # folded: the same
    elsewhere = store.save("The cat sleeps on the sofa", category="home")
    ids = {first.entry.id, other.entry.id, elsewhere.entry.id}
    assert len(ids) == 3  # different texts or categories: never merged
    assert again.entry.id != other.entry.id  # the slot held "Rent ...": checked, not merged
    by_id = {e.id: e for e in store.entries()}
    assert by_id[other.entry.id].content == "Rent is due on the first of the month"
    assert by_id[first.entry.id].content == "The cat sleeps on the sofa"
    assert by_id[elsewhere.entry.id].category == "home"


def test_the_backfill_embeds_live_entries_without_vectors_oldest_first_a_batch_at_a_time(
    tmp_path: Path,
) -> None:
    """Past the rows' first growth (1,024), with deleted, archived and already embedded
    entries among them: exactly the live ones without a vector, in the order saved."""
    embedder = Counting()
    store = LongTermStore(tmp_path, embedder=embedder)
    saved = [store.save(f"harbour note number {i}").entry for i in range(1_500)]
    assert store.backfill(batch=10) == 10  # these ten now have vectors
    assert embedder.seen == [e.content for e in saved[:10]]
    for entry in saved[100:200]:
        store.delete(entry.id)
    store.apply([replace(e, archived_at=e.updated_at) for e in saved[300:310]])
    embedder.seen.clear()
    batches = []
    while done := store.backfill(batch=500):
        batches.append(done)
    wanted = [e.content for i, e in enumerate(saved) if 10 <= i < 100 or 200 <= i < 300 or i >= 310]
    assert embedder.seen == wanted and batches == [500, 500, 380]
    assert store.missing_vectors() == 0 and not store.vectors_wanted.is_set()


def test_a_save_while_the_backfill_finds_nothing_to_embed_still_wants_its_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between the backfill's look (nothing missing) and its return: a save made
    there must leave `vectors_wanted` set, and call the hook that wakes the server's
    backfill. The backfill used to clear the flag after finding nothing, erasing that save's
    wake-up; its vector then waited for the next save or the 30 s idle round."""
    from dreamwell.stores.index.rows import Rows

    woken = []
    store = LongTermStore(
        tmp_path, embedder=HashEmbedder(), on_vectors_wanted=lambda: woken.append(1)
    )
    store.save("the first note")
    assert store.vectors_wanted.is_set() and woken
    assert store.backfill() == 1
    assert store.backfill() == 0 and not store.vectors_wanted.is_set()
    before = len(woken)
    look = Rows.without_vector

    def look_then_save(rows: Rows, limit: int) -> list[str]:
        found = look(rows, limit)
        if not found:  # the backfill found nothing: another thread saves now
            saver = threading.Thread(target=store.save, args=("saved in the window",))
            saver.start()
            saver.join()
        return found

    monkeypatch.setattr(Rows, "without_vector", look_then_save)
    assert store.backfill() == 0
    monkeypatch.undo()
    assert store.missing_vectors() == 1
    assert store.vectors_wanted.is_set() and len(woken) == before + 1
    assert store.backfill() == 1 and store.missing_vectors() == 0


def test_a_search_embeds_the_missing_vectors_only_up_to_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to SEARCH_EMBEDS entries without a vector are embedded by the search itself; one
    more and it ranks by keywords alone rather than embed them all in a tool call."""
    import dreamwell.stores.longterm.vectors as vectors

    monkeypatch.setattr(vectors, "SEARCH_EMBEDS", 3)
    embedder = Counting()
    store = LongTermStore(tmp_path, embedder=embedder)
    store.load_vectors()  # as the server does after start-up
    saved = [store.save(f"harbour note number {i}").entry.content for i in range(3)]
    store.search("harbour")
    seen = [t for t in embedder.seen if t != "harbour" and t not in REFERENCES]
    assert sorted(seen) == sorted(saved)  # (and the relevance rule's reference sentences)
    assert "harbour" in embedder.seen  # with them embedded the store has vectors to rank by
    embedder.seen.clear()
    fresh = LongTermStore(tmp_path / "other", embedder=embedder)
    fresh.load_vectors()
    for i in range(4):
        fresh.save(f"lighthouse note number {i}")
    fresh.search("lighthouse")
    assert embedder.seen == []  # four missing: keywords only, not even the query embedded


def test_metadata_is_held_immutable_and_reads_back_as_saved_from_the_log_and_the_table(
    tmp_path: Path,
) -> None:
    import json
    import pickle

    from dreamwell.stores.model import NO_METADATA, Metadata, entry_to_dict

    store = LongTermStore(tmp_path)
    first = store.save("the office is in Leeds", caller="session/a").entry
    second = store.save(
        "the team meets on Mondays", metadata={"source": "notes", "a": "1"}, caller="session/a"
    ).entry
    expected = {"a": "1", "follows": first.id, "source": "notes"}
    assert second.metadata == expected and expected == second.metadata
    assert dict(second.metadata) == expected and second.metadata.get("b") is None
    assert first.metadata == {} and store.save("x y z").entry.metadata is NO_METADATA
    with pytest.raises(TypeError):
        second.metadata["source"] = "changed"  # type: ignore[index]
    replayed = LongTermStore(tmp_path).get(second.id)  # another process: from the log
    store.checkpoint()
    loaded = LongTermStore(tmp_path).get(second.id)  # from LanceDB
    for entry in (replayed, loaded):
        assert entry is not None and entry == second
        assert isinstance(entry.metadata, Metadata) and entry.metadata == expected
        assert json.loads(json.dumps(entry_to_dict(entry)))["metadata"] == expected
        assert pickle.loads(pickle.dumps(entry)) == entry
        assert hash(entry.metadata) == hash(Metadata(expected))


def test_the_snapshot_yields_the_interpreter_lock_while_it_encodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encoding a snapshot is pure Python on the checkpoint thread; a save beside it, back
    from each of its system calls, waited up to the 5 ms switch interval for the interpreter
    lock every time, 86-175 ms in all (tests/bench/save_tail_bench.py: max 159-175 ms over
    10,000 saves). It now lets go of the lock every YIELD_EVERY entries (max 72-104 ms)."""
    store = LongTermStore(tmp_path)
    for i in range(40):
        store.save(f"tide table for week {i}")
    yields: list[float] = []
    me, sleep = threading.get_ident(), time.sleep

    def counted(seconds: float) -> None:
        if threading.get_ident() == me:
            yields.append(seconds)
        else:  # another thread's sleep
            sleep(seconds)

    monkeypatch.setattr(snapshot.time, "sleep", counted)
    snapshot.write(tmp_path / "snap.gz", 40, store.entries())
    assert len(yields) == 40 // snapshot.YIELD_EVERY and set(yields) == {0}
    read = snapshot.read(tmp_path / "snap.gz")
    assert read is not None and len(read.entries) == 40


def test_the_snapshot_joins_and_encodes_its_text_in_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 57: at 100,000 memories the snapshot's text (40 MB) was joined and encoded at
    once, each holding the interpreter lock 23-30 ms, and the saves beside the checkpoint
    waited that long (a thread sleeping 1 ms woke 27-30 ms late; 5.5-6 ms in parts). It is
    written ROWS_A_WRITE entries at a time, and reads back whole across the parts' seams."""
    store = LongTermStore(tmp_path)
    for i in range(10):
        store.save(f"tide table for week {i}")
    monkeypatch.setattr(snapshot, "ROWS_A_WRITE", 3)
    writes: list[bytes] = []
    original = snapshot.gzip.GzipFile.write

    def recorded(self: gzip.GzipFile, data: bytes) -> int:
        writes.append(bytes(data))
        return original(self, data)

    monkeypatch.setattr(snapshot.gzip.GzipFile, "write", recorded)
    snapshot.write(tmp_path / "snap.gz", 10, store.entries())
    rows = [w for w in writes[1:] if w != b"\n"]  # after the header, without the seams
    assert [len(w.splitlines()) for w in rows] == [3, 3, 3, 1]
    read = snapshot.read(tmp_path / "snap.gz")
    assert read is not None and read.seq == 10
    assert sorted(read.entries.values(), key=lambda e: e.id) == sorted(
        store.entries(), key=lambda e: e.id
    )


def test_a_lent_vector_is_not_set_again_when_its_log_record_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 57: the backfill lends each vector as it is embedded, then logs the batch and
    reads its record back under the write lock. Reading back set every vector again (4-6 ms
    of the lock for 64, which saves queued behind); a vector lent for the same text is kept
    as it is, and one another process logged is set from its record."""
    from dreamwell.stores.index.rows import Rows

    store = LongTermStore(tmp_path, embedder=HashEmbedder())
    other_process = LongTermStore(tmp_path, embedder=HashEmbedder())
    store.load_vectors()
    mine = store.save("the ferry leaves at nine", "travel").entry
    theirs = other_process.save("the bridge opens at ten", "travel").entry
    set_vector = Rows.set_vector
    calls: list[tuple[int, str]] = []

    def counted(self: Rows, entry_id: str, *args: Any) -> None:
        calls.append((id(self), entry_id))
        set_vector(self, entry_id, *args)

    monkeypatch.setattr(Rows, "set_vector", counted)
    assert other_process.backfill() == 1
    assert store.backfill() == 1 and store.missing_vectors() == 0
    rows = id(store._vectors.parts.mirror.rows)
    assert calls.count((rows, mine.id)) == 1  # lent as it was embedded, not again once logged
    assert calls.count((rows, theirs.id)) == 1  # read from the other process's record
    assert [h.entry.id for h in store.search("ferry")][:1] == [mine.id]
    assert [h.entry.id for h in store.search("bridge")][:1] == [theirs.id]

"""Work is not duplicated across processes on one data directory: two stores opened on one
directory (as two `dreamwell serve` processes have them), each counting what it embeds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

import dreamwell.stores.longterm.checkpoint as checkpoint
import dreamwell.stores.longterm.mirror as mirror
from dreamwell.stores import LongTermStore, MemoryEntry, utcnow
from dreamwell.stores.index.relevance import REFERENCES
from tests.support.embedders import Counting, Gated, overlapping_backfills


def opened(path: Path, embedder: Counting | None) -> LongTermStore:
    store = LongTermStore(path, embedder=embedder)
    store.load_vectors()  # as the server does after start-up
    return store


def test_a_memory_is_embedded_only_by_the_process_that_saved_it(tmp_path: Path) -> None:
    """The reader searches and backfills while the writer's saves are still unembedded: it
    leaves them to the writer (before, its search and its backfill embedded each again)."""
    writer_embedder, reader_embedder = Counting(), Counting()
    writer = opened(tmp_path, writer_embedder)
    reader = opened(tmp_path, reader_embedder)
    saved = [writer.save(f"harbour note number {i}").entry.content for i in range(5)]
    assert [h.entry.content for h in reader.search("harbour note")] != []
    assert reader.backfill() == 0
    assert not set(saved) & set(reader_embedder.seen)  # at most the query, no memory
    claimed_for = reader.vectors_claimed_for()
    assert claimed_for is not None and 0 < claimed_for <= mirror.FOREIGN_GRACE
    assert writer.backfill() == 5
    assert sorted(writer_embedder.seen) == sorted(saved)
    reader.search("harbour note")
    assert len(reader.vectors(reader_embedder.name)) == 5  # the writer's, read from the log
    assert reader.vectors_claimed_for() is None
    # now by vectors too: the query only (and the relevance floor's reference sentences)
    assert [t for t in reader_embedder.seen if t not in REFERENCES] == ["harbour note"]


def test_memories_whose_saver_never_embeds_them_are_embedded_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saver without an embedder logs no vectors: once the grace is over (here at once),
    the other process embeds them, once."""
    reader_embedder = Counting()
    writer = opened(tmp_path, None)
    reader = opened(tmp_path, reader_embedder)
    saved = [writer.save(f"lighthouse note number {i}").entry.content for i in range(3)]
    assert reader.backfill() == 0 and reader_embedder.seen == []
    monkeypatch.setattr(mirror, "FOREIGN_GRACE", 0.0)
    assert reader.vectors_claimed_for() == 0.0
    assert reader.backfill() == 3 and sorted(reader_embedder.seen) == sorted(saved)
    assert reader.backfill() == 0 and reader.missing_vectors() == 0
    assert reader.vectors_claimed_for() is None


def test_memories_already_there_when_a_store_opens_are_embedded_at_once(tmp_path: Path) -> None:
    """Nobody is known to be embedding what was saved before this process looked."""
    writer = opened(tmp_path, None)
    saved = [writer.save(f"beacon note number {i}").entry.content for i in range(3)]
    reader_embedder = Counting()
    reader = opened(tmp_path, reader_embedder)
    assert reader.vectors_claimed_for() is None
    assert reader.backfill() == 3 and sorted(reader_embedder.seen) == sorted(saved)


def test_an_edit_by_another_process_is_left_to_it_and_an_archive_needs_no_vector(
    tmp_path: Path,
) -> None:
    writer_embedder, reader_embedder = Counting(), Counting()
    writer = opened(tmp_path, writer_embedder)
    reader = opened(tmp_path, reader_embedder)
    first = writer.save("the ferry leaves at nine").entry
    second = writer.save("the ferry is blue").entry
    assert writer.backfill() == 2
    assert reader.backfill() == 0 and reader.missing_vectors() == 0
    writer.apply(
        [replace(first, content="the ferry leaves at ten"), replace(second, archived_at=utcnow())]
    )
    assert reader.backfill() == 0 and reader_embedder.seen == []
    assert writer.backfill() == 1
    assert reader.missing_vectors() == 0 and reader.vectors_claimed_for() is None


def test_catching_up_on_another_process_copies_the_view_once_not_once_per_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 saves by another process, one log record each: the reader applies them with one
    new view whose overlay holds what changed (before: 1,000 views, each copying the growing
    overlay, half a million entries copied for a thousand changed)."""
    from dreamwell.stores.index.view import View

    writer = opened(tmp_path, None)
    reader = opened(tmp_path, None)
    assert reader.count() == 0
    for i in range(1_000):
        writer.save(f"quay note number {i}")
    copied: list[int] = []
    real = View.with_changes

    def counted(self: View, changes: Mapping[str, MemoryEntry | None]) -> View:
        copied.append(len(self.over) + len(changes))
        return real(self, changes)

    monkeypatch.setattr(View, "with_changes", counted)
    assert reader.count() == 1_000
    assert len(copied) == 1 and sum(copied) == 1_000


def test_another_process_s_saves_do_not_wake_this_one_s_backfill(tmp_path: Path) -> None:
    writer = opened(tmp_path, Counting())
    reader = opened(tmp_path, Counting())
    reader.backfill()
    assert not reader.vectors_wanted.is_set()
    writer.save("the tide turns at noon")
    assert reader.missing_vectors() == 1  # seen, and left to the writer
    assert not reader.vectors_wanted.is_set()
    reader.apply([replace(reader.entries()[0], importance=0.9)])  # its own change wakes it
    assert reader.vectors_wanted.is_set()


def test_a_vector_another_process_logs_while_this_one_embeds_is_not_logged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a second vector record for the memory was logged. Two servers on one
    directory take turns to backfill (`backfill.lock`), but replicas on object storage
    each lock their own cache (tests/stores/longterm/test_remote_store.py), so their
    backfills overlap like these two stores'."""
    saver = opened(tmp_path, Counting())
    other = opened(tmp_path, Gated())
    assert overlapping_backfills(saver, other, monkeypatch) == [saver.entries()[0].id]


def test_the_process_that_writes_folds_its_writes_and_a_searching_one_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past CHECKPOINT_RECORDS pending changes, only the process that wrote them is due to
    fold them; one that only searches waits until they are FOREIGN_AGE times older than a
    checkpoint's age (the writer stopped or died), and its own save makes it due again.
    Meanwhile it finds them: a checkpoint is not what makes them searchable."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_RECORDS", 3)
    writer, reader = opened(tmp_path, None), opened(tmp_path, None)
    for i in range(3):
        writer.save(f"quarry ledger entry {i}")
    assert [h.entry.content for h in reader.search("quarry ledger entry 2")][:1] == [
        "quarry ledger entry 2"
    ]
    assert writer.checkpoint_due() and not reader.checkpoint_due()
    assert not reader.checkpoint_due(max_age=60.0 / checkpoint.FOREIGN_AGE)
    assert reader.checkpoint_due(max_age=0.0)  # the writer left them: the reader folds them
    reader.save("a reader's own note")
    assert reader.checkpoint_due()
    assert writer.checkpoint()
    assert not reader.checkpoint_due(max_age=0.0) and not writer.checkpoint_due(max_age=0.0)
    assert len(reader.search("quarry ledger entry")) == 3

"""One LongTermStore used from several threads at once, as a server's tool calls and its
background checkpoint use it, while another writer saves and checkpoints."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore
from dreamwell.stores.longterm import state
from dreamwell.stores.longterm.log import Record
from dreamwell.stores.longterm.wal import Wal


@pytest.fixture
def busy_threads() -> Iterator[None]:
    """Switch threads every 10 µs instead of every 5 ms, so races show within seconds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("busy_threads")
def test_reads_from_six_threads_never_fail_while_checkpoints_rotate_the_log(
    tmp_path: Path,
) -> None:
    """The defect (a stress run; the deterministic form is below): Wal.has_unread() fstat'ed
    a segment descriptor another thread's catch-up had just closed (EBADF: 'The data
    directory refused this operation' on search_memory; or TypeError when it was None), and
    the checkpoint thread's rotate() closed it under another thread's read."""
    writer, reader = LongTermStore(tmp_path), LongTermStore(tmp_path)
    errors: list[Exception] = []
    stop = threading.Event()

    def loop(work: Callable[[], object]) -> None:
        while not stop.is_set():
            try:
                work()
            except (OSError, TypeError) as exc:
                errors.append(exc)
                stop.set()

    threads = [threading.Thread(target=loop, args=(reader.count,)) for _ in range(6)]
    threads.append(threading.Thread(target=loop, args=(reader.checkpoint,)))  # as a server does
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 15  # the race showed within 3-17 s before the fix
    try:
        for i in range(1_000_000):
            if stop.is_set() or time.monotonic() > deadline:
                break
            writer.save(f"fact number {i}")
            if i % 2 == 1:
                writer.checkpoint()  # a new log segment: readers close the old one
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert errors == []
    assert reader.count() == writer.count()


def test_has_unread_never_fstats_a_descriptor_another_thread_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic form of the race above: another thread closes the segment exactly
    between has_unread()'s check of the descriptor and its fstat."""
    from dreamwell.stores.longterm import wal as wal_module

    store = LongTermStore(tmp_path)
    store.save("one fact")
    log = wal_module.Wal(tmp_path / "wal")
    log.read_new()  # holds the segment open
    real_fstat = os.fstat
    closer = threading.Thread(target=log.close)

    def fstat_after_a_close(fd: int) -> os.stat_result:
        if not closer.is_alive() and closer.ident is None:
            closer.start()
            closer.join(timeout=0.5)  # with the lock the close waits for this fstat
        return real_fstat(fd)

    monkeypatch.setattr(wal_module.os, "fstat", fstat_after_a_close)
    assert log.has_unread() is False
    closer.join(timeout=5)
    assert not closer.is_alive()


def test_a_read_waits_for_the_catch_up_another_thread_began_with_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two-server run's flake ("deleted ..., searched on server 0: Found 1 memory
    entry"): one thread's catch-up had read another process's delete from the log and not yet
    applied it (the view's lock was busy) when a search on another thread checked for news.
    The log's offset was past the delete already, so there was none: the search served the
    deleted memory. A read now waits for a catch-up under way before it looks."""
    monkeypatch.setattr(state, "_RECHECK_SECONDS", 60.0)  # the state file's stamp is trusted
    writer, reader = LongTermStore(tmp_path), LongTermStore(tmp_path)
    entry = writer.save("the lighthouse keeper's logbook", "notes").entry
    writer.checkpoint()  # a state file, whose stamp then says nothing changed
    assert [h.entry.id for h in reader.search("lighthouse")] == [entry.id]
    writer.delete(entry.id)
    held, release = threading.Event(), threading.Event()
    real_read = Wal.read_new

    def waited_for_the_view(wal: Wal) -> list[Record]:
        records = real_read(wal)
        if records and threading.current_thread().name == "first":
            held.set()  # read, and waiting for the view's lock (a save or a lend holds it)
            release.wait(10)
        return records

    monkeypatch.setattr(Wal, "read_new", waited_for_the_view)
    first = threading.Thread(target=reader.search, args=("anything",), name="first")
    first.start()
    assert held.wait(10)
    found: list[list[str]] = []
    second = threading.Thread(
        target=lambda: found.append([h.entry.id for h in reader.search("lighthouse")])
    )
    second.start()
    second.join(0.3)
    waited = second.is_alive()  # for the catch-up that holds the delete
    release.set()
    first.join(10)
    second.join(10)
    assert found == [[]] and waited

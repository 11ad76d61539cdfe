"""Keeping this process's mirror in step with every process's writes.

Reads never take a file lock: `Follower` loads the entries LanceDB holds at a checkpoint and
the log after it, then tails the log (`fresh`: a few stat() calls when nothing changed),
reloads the Tantivy searcher after another process's checkpoint, and, when the log dropped
records before this process read them, reloads the ids the state file's journal says those
checkpoints wrote (or everything).

A read never waits on an object store: on a shared log, the catch-up a read asks for runs on a
thread of its own; the read that started it waits for it at most READ_WAIT seconds, reads
arriving while one is under way do not wait at all, and both then serve what this replica
holds (its own writes included: a writer applies them before it returns). A hung or refusing
store thus delays other replicas' news, never a search.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from dreamwell.stores.errors import StoreBusy, StoreUnreachable
from dreamwell.stores.index.text_index import TextIndex
from dreamwell.stores.longterm.lance_table import MemoryTable
from dreamwell.stores.longterm.log import Log, LogGap, Record
from dreamwell.stores.longterm.mirror import Mirror
from dreamwell.stores.longterm.state import State, StateFile
from dreamwell.stores.model import MemoryEntry

logger = logging.getLogger(__name__)

READ_WAIT = 0.5  # seconds a read waits for the catch-up it started on a shared log


class Follower:
    def __init__(
        self, mirror: Mirror, log: Log, state: StateFile, table: MemoryTable, index: TextIndex
    ) -> None:
        self.mirror = mirror
        self.log = log
        self.state = state
        self.table = table
        self.index = index
        # on object storage: rebuild this replica's cache when the shared log dropped records
        # it had not read (the local journal knows only this machine's checkpoints)
        self.on_gap: Callable[[], None] | None = None
        self._aside: threading.Thread | None = None  # a shared log's catch-up under way
        self._aside_lock = threading.Lock()
        # held by a catch-up from its read of the log to its apply: the view's lock is taken
        # only to apply, so a search never waits for the log (locks: checkpoint -> log ->
        # this -> view)
        self._catching = threading.RLock()
        self._unreachable: tuple[float, StoreUnreachable] | None = None  # the last read's failure

    def load(self) -> None:
        """Entries from LanceDB at a checkpoint, then the log after it."""
        state, entries, start, records = self._read_consistent()
        m = self.mirror
        with m.lock:
            m.reset(entries)
            m.generation = state.generation if state.known else -1
            m.indexed = start
            self.index.reload()
            m.apply(records)
            m.foreign.clear()  # what was there when this process looked is fair game
            if m.model is not None:
                m.vectors_ready = False

    def _read_consistent(self) -> tuple[State, Sequence[MemoryEntry], int, list[Record]]:
        """The state, LanceDB's entries and the log after them, from one checkpoint."""
        for _ in range(20):
            state = self.state.read()
            entries = self.table.entries()
            if self.state.read().generation != state.generation:
                continue  # a checkpoint finished meanwhile: read again
            start = state.checkpoint if state.known else self.log.first_seq() - 1
            self.log.start_at(start)
            try:
                return state, entries, start, self.log.read_new()
            except LogGap:
                continue
        raise StoreBusy("the memory store kept changing while it was opened; try again.")

    def fresh(self) -> None:
        """Pick up what any process wrote: a few stat() calls when nothing changed. A log on
        object storage that cannot be reached, or answers slowly, leaves reads with what this
        process holds (writes still hear the error).

        On a local log the look is taken under the catch-up's lock: a catch-up under way on
        another thread may have read what this read needs (the log's offset is past it, so
        there is no news) and not applied it yet (the two-server run served a memory another
        process had deleted)."""
        if not getattr(self.log, "blocking", False):
            with self._catching:
                if self._news():
                    self._serving_catch_up()
            return
        if not self._news():
            return
        with self._aside_lock:
            running = self._aside
            if running is not None and running.is_alive():
                return  # another read started one: serve what is held now
            running = self._aside = threading.Thread(
                target=self._serving_catch_up, name="dreamwell-catch-up", daemon=True
            )
            running.start()
        running.join(READ_WAIT)

    def _news(self) -> bool:
        """Whether another process may have written: the state file or the log changed (a
        few stat() calls; True may be a false alarm)."""
        return not self.state.unchanged() or self.log.has_news()

    def _serving_catch_up(self) -> None:
        try:
            self.catch_up()
        except StoreUnreachable as exc:
            logger.warning("serving what this replica holds: %s", exc)
        except Exception:  # on the catch-up thread: logged, and the next read tries again
            if threading.current_thread() is not self._aside:
                raise
            logger.exception("catching up with the log failed")

    def catch_up(self) -> None:
        """Read the log's new records into the view. The view's lock is held only to apply
        them, never during the read (on an object store that hangs, a read held it for the
        read's time-out, and every search with pending entries waited: 32-65 s). On object
        storage, a gap (the shared log was trimmed past what this replica read) is handled by
        `on_gap` once the catch-up's lock is released: it takes the checkpoint and log locks,
        and a saver holds the log's lock while it waits for the catch-up's (locks go
        checkpoint -> log -> catch-up -> view). Called under the view's lock, it deadlocked a
        saver and the catch-up thread (a 20,000-save run)."""
        m, on_gap = self.mirror, self.on_gap
        began = time.monotonic()
        with self._catching:  # one catch-up at a time: records are applied in the order read
            failed = self._unreachable
            if failed is not None and failed[0] > began:  # the one waited for could not reach
                raise failed[1]  # the store: a writer hears it now, not after a read of its own
            state = self.state.read()
            with m.lock:
                if state.known and state.checkpoint > m.indexed and not self.index.in_ram:
                    self.index.reload()
                    m.checkpointed(state.checkpoint)
            try:  # never under the view's lock: on an object store this read can hang
                records = self.log.read_new()
            except StoreUnreachable as exc:
                self._unreachable = (time.monotonic(), exc)
                raise
            except LogGap as gap:
                logger.info("catching up from LanceDB: %s", gap)
                if on_gap is None:
                    with m.lock:
                        self._recover(state)
                    return
            else:
                with m.lock:
                    m.apply(records)
                    if state.known and self.log.last_seq >= state.checkpoint:
                        m.generation = state.generation
                return
        if on_gap is not None:  # the gap, with the catch-up's and the view's locks released
            on_gap()

    def _recover(self, state: State) -> None:
        """Some log records were checkpointed and dropped before this process read them:
        reload the ids the journal says those checkpoints wrote (or everything)."""
        m = self.mirror
        ids = state.changed_since(m.generation) if state.known else None
        if ids is None:
            self.load()
            return
        found = {e.id: e for e in self.table.get(sorted(ids))}
        changes: dict[str, MemoryEntry | None] = {i: found.get(i) for i in ids}
        self.log.start_at(state.checkpoint)
        m.change(changes, {})
        if m.model is not None and found:
            m.adopt(self.table.vectors(m.model, sorted(found)))
        m.generation = state.generation
        self.catch_up()

"""Checkpoints: when and how the log is folded into LanceDB and Tantivy, and maintenance.

A checkpoint runs under `checkpoint.lock` without holding up saves: under the write lock it
seals the log (new writes go after the seal), then folds the sealed records
(`stores/longterm/table_writes.py`), records the new checkpoint, LanceDB version and the ids it
wrote in the state file, lets the log drop what was folded, and compacts LanceDB once it has many
fragments. This module also owns rebuilding this process's rows without those of deleted entries,
compacting LanceDB on request and rebuilding the text index.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from filelock import Timeout

from dreamwell.stores.errors import StoreError
from dreamwell.stores.longterm import lance_files as lancefiles
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.repair import Repair
from dreamwell.stores.longterm.table_writes import fold

logger = logging.getLogger(__name__)

CHECKPOINT_RECORDS = 512  # fold the log into LanceDB/Tantivy when this many ids are pending
CHECKPOINT_SECONDS = 5.0  # ... or when the oldest pending change is this old
FOREIGN_AGE = 2.0  # times CHECKPOINT_SECONDS that other processes' changes wait (see `due`)
COMPACT_FRAGMENTS = 16  # compact LanceDB when it has this many fragments
KEEP_VERSIONS = timedelta(seconds=30)  # old LanceDB versions kept for readers mid-scan
ROWS_SLACK = 4096  # rows of deleted entries a process keeps beyond one per entry (see below)


class Checkpointer:
    def __init__(self, parts: Parts, repair: Repair) -> None:
        self.parts = parts
        self.repair = repair

    def due(self, max_age: float = CHECKPOINT_SECONDS) -> bool:
        """Enough changes are pending, or the oldest has waited `max_age` seconds; when this
        process wrote none of them, only once the oldest has waited FOREIGN_AGE times that.
        The process that writes folds its writes: a server that only searches beside another
        saving at full speed had folded them half the time (both look every 0.5 s), and its
        searches waited for the fold's Python work and the snapshot (GIL and cores). Should
        the writer stop or die, the others still fold what it left."""
        m = self.parts.mirror
        self.parts.follower.fresh()
        pending = m.pending
        if not pending:
            return False
        own = m.appended > m.indexed
        if own and len(pending) >= CHECKPOINT_RECORDS:
            return True
        oldest = min(p[1] for p in pending.values())
        return time.monotonic() - oldest >= (max_age if own else FOREIGN_AGE * max_age)

    def checkpoint(self, wait: bool = True) -> bool:
        """Fold the log into LanceDB and Tantivy and drop the folded records. Returns False
        when another process is doing it (with wait=False) or there was nothing to fold."""
        self.compact_rows()
        p = self.parts
        try:
            p.cplock.acquire(timeout=None if wait else 0)
        except Timeout:
            return False
        except OSError as exc:
            raise StoreError(f"cannot checkpoint {p.dirs.root}: {exc.strerror}") from exc
        try:
            if not self._checkpoint():
                return False
        finally:
            p.cplock.release()
        p.follower.catch_up()
        return True

    def _checkpoint(self) -> bool:
        """Seal, fold, record, compact (caller holds the checkpoint lock)."""
        p = self.parts
        began = time.perf_counter()
        self.repair.check_table()
        sealed = self._seal()
        if sealed is None:
            return False
        start, end = sealed
        at_seal = time.perf_counter()
        touched = fold(p, start, end)
        folded = time.perf_counter()
        covered = self._snapshot(end)
        with p.log.locked():
            p.state.write(p.state.read(), end, p.table.version, touched)
            p.log.drop_sealed(min(end, covered))
        recorded = time.perf_counter()
        if p.table.fragments() >= COMPACT_FRAGMENTS:
            p.table.optimize(KEEP_VERSIONS)
        lancefiles.record(p.dirs.lancedb, p.dirs.lance_sums)
        logger.debug(
            "checkpoint of %d changes: %.0f ms (seal %.0f, fold %.0f, compaction %.0f)",
            len(touched),
            1000 * (time.perf_counter() - began),
            1000 * (at_seal - began),
            1000 * (folded - at_seal),
            1000 * (time.perf_counter() - recorded),
        )
        return True

    def _snapshot(self, end: int) -> int:
        """Write a new snapshot if one is due; returns the seq the snapshot covers (0: none),
        up to which the log may drop its records. The records are this process's view (an
        immutable copy, taken with the seq it reflects under the write lock), not a read
        of LanceDB: encoding them is the only cost."""
        p = self.parts
        path = p.dirs.snapshot
        covered = snapshot.header_seq(path) or 0
        if p.shared is not None:  # object storage: the stored snapshots are the ones that count
            covered = p.shared.latest() or 0
            due = end - covered >= max(snapshot.SNAPSHOT_EVERY, p.mirror.view.size // 4)
        else:
            due = snapshot.due(path, end, p.mirror.view.size)
        if p.table.damaged or not due:
            return covered  # never replace a good snapshot with a damaged table's records
        with p.log.locked():
            p.follower.catch_up()
            view, seq = p.mirror.view, p.log.last_seq
        try:
            snapshot.write(path, seq, view.values())
            if p.shared is not None:
                p.shared.upload(path, seq)
        except (OSError, StoreError) as exc:
            logger.error("cannot write the snapshot %s: %s", path, exc)
            return covered
        return seq

    def _seal(self) -> tuple[int, int] | None:
        """Seal the log: (the last checkpoint, the last record now), None if nothing is new."""
        p = self.parts
        with p.log.locked():  # new writes go after the seal
            p.follower.catch_up()
            state = p.state.read()
            start = state.checkpoint if state.known else p.log.first_seq() - 1
            end = p.log.last_seq
            if end <= start:
                return None
            p.log.rotate()
        return start, end

    def compact_rows(self) -> None:
        """Rebuild this process's rows without those of deleted entries once they outnumber
        the entries by ROWS_SLACK: each row holds a vector, and a server that saves and
        deletes for months would otherwise keep one for every memory it ever saw. Readers
        keep the rows they took; the rebuild takes about a second per 100,000 entries, off
        the tool calls' path (checkpoints run in the background)."""
        m = self.parts.mirror
        with m.lock:
            if m.rows.n > 2 * m.view.size + ROWS_SLACK:
                m.rows = m.rows.compacted(m.view.values())

    def maintain(self, keep_versions_for: timedelta = KEEP_VERSIONS) -> None:
        """Checkpoint, then compact LanceDB and drop old versions."""
        self.checkpoint()
        p = self.parts
        with p.cplock:
            p.table.optimize(keep_versions_for)
            lancefiles.record(p.dirs.lancedb, p.dirs.lance_sums)

    def reindex(self) -> None:
        """Rebuild the Tantivy index from LanceDB (after a checkpoint)."""
        self.checkpoint()
        p = self.parts
        with p.cplock:
            live = [e for e in p.table.entries() if e.live]
            p.index.rebuild(p.mirror.doc(e) for e in live)
            with p.log.locked():
                state = p.state.read()
                p.state.write(state, state.checkpoint, p.table.version, set())
        p.follower.catch_up()

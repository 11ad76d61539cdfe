"""Long-term memory's durable log on object storage: LanceDB tables shared by every replica.

The `Log` of `stores/longterm/log.py` for a remote data directory. One row per append: `n` (the
append's number: 1, 2, 3, ...; an unenforced primary key), `first` and `last` (the seqs of
its first and last record) and `body` (the records' operations, JSON). Appends go to one table
per generation of ROLL_EVERY appends (`stores/longterm/shared/tables.py`: a table slows with its
age, so the log starts a fresh one now and then); a reader goes on to the next generation's
table when it has read to the end of one. An append is a
`merge_insert` on `n` that inserts only when no row `n` exists: of replicas racing for the
same `n` exactly one lands (LanceDB's commit is a conditional PUT, and the primary key makes a
concurrent insert of the same key a conflict rather than a second row); the others hear
`LogConflict`, read what won and decide again. So there is no lock across machines, and a save
is acknowledged once its row's commit landed.

Readers check the newest table's latest version in a background thread (`poll` seconds apart)
and read the rows after the last they read. Dropping folded records drops whole generations,
and deletes rows of the oldest one left, below a snapshot that is already stored
(`stores/longterm/shared/snapshots.py`). The poller also compacts the tables and removes their
old versions (`stores/longterm/shared/tidy.py`: under appends, at rest, and once a generation is
full), so the objects under the log's tables stay proportional to what the log holds, not to
how many appends it ever saw. Both are safe beside other replicas' appends: a compaction is a
Lance `Rewrite`, which concurrent appends are rebased over (a conflicting one is retried by Lance
or lost harmlessly to the next try); the cleanup never touches the latest version nor files
newer than the cut (Lance keeps unreferenced files of a write still in progress for 7 days),
readers here check out the latest version right before they read, and a read or append that
used a version removed meanwhile goes again afresh; an append checks out again first when its
handle's version may have been removed (FRESH_BASE).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

from dreamwell.stores.errors import StoreError, StoreUnreachable
from dreamwell.stores.longterm.lance_table import LogTable
from dreamwell.stores.longterm.log import LogConflict, LogGap, Op, Record
from dreamwell.stores.longterm.shared.tables import (
    LogTables,
    begins_next,
    cleaned_up,
    first_n,
    generation,
    overwritten,
)
from dreamwell.stores.longterm.shared.tidy import KEEP_VERSIONS, Tidier
from dreamwell.stores.remote.location import Remote, describe

logger = logging.getLogger(__name__)

KEEP_RECORDS = 256  # records kept below a drop point, for replicas a little behind
# An append is based on the version its table's handle last checked out. LanceDB commits an
# insert whose base version a cleanup removed without seeing an insert of the same `n` made
# since (that one's version removed too): two rows for one `n`. So an append checks out the
# table again when its handle's version may be that old, and one that took a keep-time from
# its base to its commit checks that its row is alone (tests/stores/longterm/shared).
FRESH_BASE = KEEP_VERSIONS.total_seconds() / 4


@contextlib.contextmanager
def reaching(remote: Remote, doing: str) -> Iterator[None]:
    """Object-store errors as one line a client can read. The write was not acknowledged (a
    commit that timed out may still have landed; retrying a save then reinforces it)."""
    try:
        yield
    except (LogConflict, LogGap, StoreError):
        raise
    except Exception as exc:  # LanceDB raises OSError/RuntimeError/ValueError with the exchange
        raise StoreUnreachable(f"cannot {doing} {remote.uri}: {describe(exc)}") from None


def _v(gen: int, version: int) -> int:
    """A version of the whole log, in order: the generation, then its table's version."""
    return (gen << 32) | max(version, 0)


class LanceLog:
    blocking = True  # reads of it wait on the network: readers do not wait for them

    def __init__(self, remote: Remote, poll: float = 0.25) -> None:
        self.remote = remote
        self._tables = LogTables(remote)
        with reaching(remote, "open the log in"):
            if not self._tables.listed():
                self._tables.get(0, create=True)
        self._lock = threading.RLock()  # where this process has read up to
        self._write_lock = threading.RLock()  # `locked()`: one appender in this process
        self.last_seq = 0
        self._tail_n = 0  # the number of the last row read
        self._read_version = 0  # the log version (`_v`) the last read saw
        self._seen_version = 0  # the newest log version the poller saw
        self._own: tuple[int, int, list[Record]] | None = None  # our last append: version, n
        self._appends = 0
        self.conflicts = 0  # appends another replica won (for stats and benchmarks)
        self._tidier: Tidier | None = None  # the poller's, once it runs
        self._last_append_version = -1  # the log version our last append made
        self._poll = poll
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        # the poller's last answer from the store (wall time), the start of its question in
        # flight (None: none), and whether its last question failed: `silent_since`
        self._answered = time.time()
        self._asking: float | None = None
        self._failing = False

    # ---- reading -----------------------------------------------------------------------------
    def start_at(self, seq: int) -> None:
        with self._lock:
            self.last_seq = seq
            self._tail_n = 0
            self._read_version = 0
            self._own = None

    def first_seq(self) -> int:
        with self._lock, reaching(self.remote, "read the log in"):
            for gen in self._tables.live():
                first = self._tables.read(gen, lambda t, _: t.extreme("first", low=True))
                if first is not None:
                    return first
        return 1

    def has_news(self) -> bool:
        self._ensure_poller()
        return self._seen_version > self._read_version

    def _polling(self) -> bool:
        """Whether the poller runs (started if not: then the caller reads the table)."""
        alive = self._poller is not None and self._poller.is_alive()
        self._ensure_poller()
        return alive

    def _ensure_poller(self) -> None:
        if self._poller is None or not self._poller.is_alive():
            self._poller = threading.Thread(
                target=self._watch, name="dreamwell-log-poll", daemon=True
            )
            self._poller.start()

    def _watch(self) -> None:
        """Note the newest table's latest version every `poll` seconds (one LIST of
        manifests), and let the tidier compact the tables (tidy.py)."""
        tables = LogTables(self.remote)  # its own connections: check-outs do not race reads
        tidier = self._tidier = Tidier(tables, self._appended_last)
        gen = 0
        while True:
            try:
                self._asking = time.time()
                gen = max(gen, generation(self._tail_n + 1))
                found = tables.checked_out(gen)
                if found is None:  # not begun yet, or dropped: then a newer one is the news
                    newest = max(tables.listed(), default=gen)
                    if newest > gen:
                        gen, found = newest, tables.checked_out(newest)
                tables.forget_below(gen)
                table, version = found or (None, 0)
                self._seen_version = _v(gen, version)
                self._answered, self._asking, self._failing = time.time(), None, False
                tidier.saw(gen, table, version)
            except Exception as exc:  # unreachable for now: readers hear it when they read
                logger.debug("polling the log: %s", exc)
                self._asking, self._failing = None, True
            if self._stop.wait(self._poll):
                return

    @property
    def compactions(self) -> int:
        """Compactions (each with its cleanup) this process's poller ran (tidy.py)."""
        return self._tidier.compactions if self._tidier else 0

    def silent_since(self, after: float) -> float | None:
        """When the store last answered the poller (wall time), if it has not since: its
        last question failed, or has waited over `after` seconds; None while it answers."""
        asking = self._asking
        if self._failing or (asking is not None and time.time() - asking > after):
            return self._answered
        return None

    def close(self) -> None:
        self._stop.set()

    def read_new(self) -> list[Record]:
        with self._lock, reaching(self.remote, "read the log in"):
            own = self._own
            self._own = None
            if own is not None and own[0] == self._read_version + 1 and own[1] == self._tail_n + 1:
                self._read_version, self._tail_n = own[0], own[1]  # nobody else wrote meanwhile
                return self._take(own[2])
            if own is None and 0 < self._read_version >= self._seen_version and self._polling():
                return []  # the poller saw nothing new (an append on stale news conflicts)
            return self._take(self._read_on())

    def _read_on(self) -> list[Record]:
        """The rows after `last_seq`, generation after generation, to the end of the log."""
        gen = generation(self._tail_n + 1) if self._tail_n else self._oldest()
        records: list[Record] = []
        while (
            version := self._tables.read(gen, partial(self._read_rows, records, gen))
        ) is not None:
            if generation(self._tail_n + 1) == gen:
                break
            gen = generation(self._tail_n + 1)  # this one is full: on to the next
        else:
            version = 0  # the next generation is not begun, or it was dropped unread:
            if any(later > gen for later in self._tables.listed()):
                raise LogGap(f"the records after {self.last_seq} were dropped from the log")
        self._tables.forget_below(gen - 1)
        self._read_version = _v(gen, version)
        self._seen_version = max(self._seen_version, self._read_version)
        return records

    def _read_rows(self, records: list[Record], gen: int, table: LogTable, version: int) -> int:
        """Add generation `gen`'s rows after `last_seq` to `records`; returns `version`."""
        rows = table.rows(f"last > {self.last_seq}")
        for row in rows:
            if int(row["n"]) <= self._tail_n and records:
                continue  # a second row of one `n` (see FRESH_BASE): the first read is kept
            expected = (records[-1].seq if records else self.last_seq) + 1
            if row["first"] > expected:
                raise LogGap(f"record {expected} was dropped from the log")
            records.extend(_records(row))
            self._tail_n = max(self._tail_n, int(row["n"]))
        if not rows and self._tail_n < first_n(gen):  # all read before: where it ends
            self._tail_n = max(self._tail_n, table.extreme("n", low=False) or 0)
        return version

    def _oldest(self) -> int:
        return min(self._tables.live(), default=0)

    def _take(self, records: list[Record]) -> list[Record]:
        out = [r for r in records if r.seq > self.last_seq]
        if out:
            self.last_seq = out[-1].seq
        return out

    # ---- writing ----------------------------------------------------------------------------
    def locked(self) -> contextlib.AbstractContextManager[None]:
        """One appender at a time in this process; across replicas an append either lands
        after everything its writer read or raises LogConflict."""
        return self._write_lock  # type: ignore[return-value]

    def append(self, batches: Sequence[Sequence[Op]]) -> int:
        first = self.last_seq + 1
        last = first + len(batches) - 1
        n = self._tail_n + 1
        gen = generation(n)
        body = json.dumps([list(ops) for ops in batches], separators=(",", ":"))
        row = {"n": n, "first": first, "last": last, "at": time.time(), "body": body}
        with self._write_lock, reaching(self.remote, "write to"):
            # a generation's table is begun by its first append; any other append that finds
            # none read a log that was dropped since (read again: it hears the gap)
            table = self._tables.get(gen, create=n == first_n(gen))
            inserted, version = self._insert(table, row) if table else (False, -1)
            if table and not inserted:
                inserted, version = self._landed(table, row)
            if not inserted:
                with self._lock:
                    self._read_version = -1  # read the table itself next time
                    self.conflicts += 1
                raise LogConflict(f"append {n} was taken by another replica")
        with self._lock:
            self._last_append_version = _v(gen, version)
            self._own = (
                _v(gen, version),
                n,
                [Record(first + i, list(ops)) for i, ops in enumerate(batches)],
            )
        self._appends += 1
        self._ensure_poller()  # it compacts the tables (tidy.py)
        if begins_next(n):
            self._begin(gen + 1)
        return last

    def _begin(self, gen: int) -> None:
        """Create generation `gen`'s table ahead of its first append (tables.py says why); the
        append that called for it has landed, so a failure here is only logged: the first
        append of `gen` creates it then."""
        try:
            self._tables.get(gen, create=True)
        except Exception as exc:
            logger.debug("beginning log generation %d: %s", gen, exc)

    def _insert(self, table: LogTable, row: dict[str, Any]) -> tuple[bool, int]:
        """Insert `row` unless its `n` exists, on a version checked out within FRESH_BASE.
        An append whose base version was cleaned up meanwhile (LanceDB read a removed file:
        "Not found"), or overwritten by another replica's create of the table (tables.py),
        did not land: it is a lost race like any other, decided again."""
        try:
            if time.monotonic() - table.checked_at > FRESH_BASE:
                table.latest()
            based = table.checked_at
            inserted, version = table.insert_if_absent(row)
            if inserted and time.monotonic() - based >= KEEP_VERSIONS.total_seconds():
                inserted = self._alone(table, row)
            return inserted, version
        except Exception as exc:
            if not (cleaned_up(exc) or overwritten(exc)):
                raise
            logger.debug("appending on a version gone meanwhile: %s", exc)
            table.latest()
            return False, -1

    def _alone(self, table: LogTable, row: dict[str, Any]) -> bool:
        """Whether `row` is the only row of its `n` in the version its insert made (a slow
        insert's base may have been removed before it committed: see FRESH_BASE). A row
        found beside it was committed first: this one is taken out again, not acknowledged."""
        return self._only(table, row, table.rows(f"n = {row['n']}", ("n", "at", "body")))

    def _only(self, table: LogTable, row: dict[str, Any], found: list[dict[str, Any]]) -> bool:
        """Whether our `row` is the only one `found` of its `n`; if not, it is taken out."""
        if len(found) <= 1:
            return True
        logger.warning("append %d met another replica's on a version removed meanwhile", row["n"])
        table.delete(f"n = {row['n']} AND at = {row['at']!r}")
        return False

    def _landed(self, table: LogTable, row: dict[str, Any]) -> tuple[bool, int]:
        """Whether row `n` holds our body after all: an insert whose commit landed but whose
        answer was lost (the store answered too late, LanceDB retried the merge and then found
        its own row) reports no insert; refusing that save would be a lie, and retrying it
        would count it twice. Nor one that landed beside another replica's row of its `n`
        (an insert on a removed base whose `_alone` check failed on a removed version too)."""
        version = table.latest()
        found = table.rows(f"n = {row['n']}", ("n", "first", "at", "body"))
        ours = (row["first"], row["at"], row["body"])  # another replica may log equal ops
        if not any((r["first"], r["at"], r["body"]) == ours for r in found):
            return False, version
        return self._only(table, row, found), version

    def _appended_last(self, gen: int, version: int) -> bool:
        return self._last_append_version == _v(gen, version)

    def rotate(self) -> int:
        return self.last_seq + 1  # rows are already boundaries a checkpoint can fold up to

    def sealed_records(self, after: int, through: int) -> Iterator[Record]:
        with self._lock, reaching(self.remote, "read the log in"):
            where = f"last > {after} AND first <= {through}"
            rows = [
                row
                for gen in self._tables.live()
                for row in self._tables.read(gen, lambda t, _: t.rows(where)) or []
            ]
        for row in rows:
            for record in _records(row):
                if after < record.seq <= through:
                    yield record

    def drop_sealed(self, through: int) -> None:
        """Drop what checkpoints folded, keeping KEEP_RECORDS below `through`. Best effort:
        what is not dropped now (the store failing, other replicas trimming at once) is kept
        until the next checkpoint drops it."""
        below = through - KEEP_RECORDS
        if below <= 0:
            return
        try:
            with self._write_lock, reaching(self.remote, "trim the log in"):
                self._trim(below)
        except StoreUnreachable as exc:
            logger.warning("%s; the next checkpoint tries again", exc)

    def _trim(self, below: int) -> None:
        gens = self._tables.live()
        for gen in gens:  # a table another replica drops meanwhile is passed over
            ends = self._tables.read(
                gen, lambda t, _: (t.extreme("first", low=True), t.extreme("last", low=False))
            )
            if ends is None:
                continue
            low, top = ends
            if gen != gens[-1] and (top is None or top <= below):
                self._tables.drop(gen)  # every record in it is folded: the whole table
                continue
            if low is not None and low <= below:
                self._tables.read(gen, lambda t, _: t.delete(f"last <= {below}"))
            return


def _records(row: dict[str, Any]) -> list[Record]:
    batches = json.loads(row["body"])
    return [Record(int(row["first"]) + i, list(ops)) for i, ops in enumerate(batches)]

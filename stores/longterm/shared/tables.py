"""The shared log's tables: one LanceDB table per generation of ROLL_EVERY appends.

Append `n` lives in generation `(n - 1) // ROLL_EVERY`: table `log` for the first ROLL_EVERY
appends (the name a single-table log had, so older locations read on), then `log-1`, `log-2`,
... A generation's table is begun halfway through the one before it (`begins_next`), by the
replica whose append landed at that `n`: one replica lands a given `n`, so one creates the
table, long before any append needs it. Replicas that all created it as their append of its
first `n` raced: LanceDB commits a create that lost the race as an Overwrite of the table the
winner made (13 saves of a 20,000-save run failed on it: "This Update transaction is
incompatible with concurrent transaction Overwrite"), and an Overwrite is compatible with any
append committed before it, so a late one would have removed an acknowledged append. The
first append of a generation still creates the table if it is missing (its creator stopped),
and an append that met such an Overwrite is a lost race, decided again (`overwritten`). A
reader that reached the end of one generation knows where to look next. Whole generations
below what checkpoints cover are dropped.

Why not one table for ever: an appended table slows with its age, not its rows (measured in
docs/benchmarks.md, "The shared log over time": merge_insert and the version check-out grew
~1.7x over 19,000 appends while the rows stayed bounded; a new table in the same process
stayed flat). A LIST of an object-store directory where thousands of objects were made and
removed is slower than a fresh one's, and a connection's LanceDB caches grow with every
version it saw. So each generation gets a fresh directory and its own connection, and the
connection goes when the log has moved on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from dreamwell.stores.longterm.lance_table import (
    LOG_TABLE,
    LogTable,
    connect,
    drop_log_table,
    log_tables,
)
from dreamwell.stores.longterm.log import LogGap
from dreamwell.stores.remote.location import Remote

T = TypeVar("T")

ROLL_EVERY = 1000  # appends per table


def generation(n: int) -> int:
    """The generation that holds append `n` (n >= 1)."""
    return max(n - 1, 0) // ROLL_EVERY


def first_n(gen: int) -> int:
    """The first append of generation `gen`."""
    return gen * ROLL_EVERY + 1


def begins_next(n: int) -> bool:
    """Whether the replica whose append `n` landed begins the next generation's table."""
    return n == first_n(generation(n)) + ROLL_EVERY // 2


def table_name(gen: int) -> str:
    return LOG_TABLE if gen == 0 else f"{LOG_TABLE}-{gen}"


def _gen_of(name: str) -> int | None:
    if name == LOG_TABLE:
        return 0
    tail = name[len(LOG_TABLE) + 1 :]
    return int(tail) if tail.isdigit() else None


class LogTables:
    """This process's handles on the log's generations, each with its own connection."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self._lock = threading.Lock()
        self._open: dict[int, LogTable] = {}
        self._floor = 0  # generations below it are known to be dropped

    def _connect(self) -> object:
        return connect(self.remote.uri, self.remote.storage_options())

    def get(self, gen: int, create: bool = False) -> LogTable | None:
        """Generation `gen`'s table; None if it does not exist and `create` is false."""
        with self._lock:
            table = self._open.get(gen)
        if table is None:
            db = self._connect()
            name = table_name(gen)
            table = LogTable(db, name) if create else LogTable.existing(db, name)
            if table is None:
                return None
            with self._lock:
                table = self._open.setdefault(gen, table)
        return table

    def read(self, gen: int, fn: Callable[[LogTable, int], T]) -> T | None:
        """`fn(table, version)` on generation `gen`'s table checked out at its latest
        version; None if the table does not exist: not begun, or dropped (by any replica's
        checkpoint, maybe while `fn` read it)."""
        for attempt in (1, 2):
            table = self.get(gen)
            if table is None:
                return None
            try:
                return fn(table, table.latest())
            except LogGap:
                raise
            except Exception as exc:
                if self._gone(gen):
                    return None
                if attempt == 2 or not cleaned_up(exc):
                    raise  # it is there: the store failed
                # a version this handle read was removed by a cleanup: once more, afresh
        return None

    def _gone(self, gen: int) -> bool:
        self.forget(gen)
        return self.get(gen) is None

    def checked_out(self, gen: int) -> tuple[LogTable, int] | None:
        """Generation `gen`'s table at its latest version, and that version (None: see
        `read`)."""
        return self.read(gen, lambda table, version: (table, version))

    def listed(self) -> list[int]:
        """The generations the location lists, oldest first (one LIST): every table begun,
        and maybe some dropped (SeaweedFS keeps a dropped table's empty folder)."""
        found = (_gen_of(name) for name in log_tables(self._connect()))
        return sorted(g for g in found if g is not None)

    def live(self) -> list[int]:
        """The generations whose tables exist, oldest first. Tables are dropped oldest first,
        so the listing is cut where they begin to open (found by halving: a long-lived
        location may list many dropped ones)."""
        listed = [g for g in self.listed() if g >= self._floor]
        lo, hi = 0, len(listed)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.checked_out(listed[mid]) is None:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(listed):
            self._floor = listed[lo]
        return listed[lo:]

    def forget_below(self, gen: int) -> None:
        """Let go of the handles (and their connections' caches) of generations below `gen`;
        they are opened again if asked for."""
        with self._lock:
            for old in [g for g in self._open if g < gen]:
                del self._open[old]

    def forget(self, gen: int) -> None:
        with self._lock:
            self._open.pop(gen, None)

    def drop(self, gen: int) -> None:
        """Remove generation `gen`'s table from the location (another replica may be
        removing it too)."""
        try:
            drop_log_table(self._connect(), table_name(gen))
        except Exception:
            if not self._gone(gen):
                raise
        self.forget(gen)


def overwritten(exc: Exception) -> bool:
    """Whether an append failed because another replica's create of the same table committed
    after the version the append was based on (LanceDB makes that create an Overwrite)."""
    return "incompatible with concurrent transaction Overwrite" in str(exc)


def cleaned_up(exc: Exception) -> bool:
    """Whether LanceDB failed because a file of a table's version is gone: its manifest or
    transaction file, or a data or deletion file only it named (a compaction's cleanup removed
    a version this process had checked out; tidy.py)."""
    text = str(exc)
    return "Not found" in text and any(
        f".lance/{part}/" in text for part in ("_versions", "_transactions", "data", "_deletions")
    )

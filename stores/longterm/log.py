"""The durable log of long-term writes, as the rest of the store sees it: the `Log` interface.

A log is a sequence of records numbered 1, 2, 3, ... without gaps; one record is one commit
(the operations of a save, or of a dream's merge and the archiving of its sources), and it
lands whole or not at all. A save is acknowledged once its record is in the log. A
checkpoint seals the log at a seq, folds the sealed records into LanceDB and Tantivy, and
then lets the log drop them; a reader that lagged behind a dropped record hears `LogGap`
and reloads what it missed from LanceDB.

This module owns that contract and nothing else. Today's implementation is the local
write-ahead log (`stores/longterm/wal.py`: segment files, a file lock, fsync); a log kept elsewhere
(a table on object storage, say) implements the same methods and the store is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

Op = dict[str, Any]  # one operation: {"op": "put", "e": ...}, {"op": "del", "id": ...}, "vec"


@dataclass(frozen=True)
class Record:
    seq: int
    ops: list[Op]


class LogConflict(Exception):
    """Another writer appended first (a log shared by replicas without a lock): nothing was
    appended; read what it wrote and decide again."""


class LogGap(Exception):
    """Records this reader needed were checkpointed and dropped before it read them."""


class Log(Protocol):
    """One process's reader and writer of the log: where it has read up to, and appending.

    Writers hold `locked()` while they read to the end, decide and `append`, so records are
    appended by one writer at a time, each after reading every earlier one."""

    @property
    def last_seq(self) -> int:
        """The last record read (or, before any, the seq given to `start_at`)."""
        ...

    def start_at(self, seq: int) -> None:
        """Read the records after `seq` from now on (after loading a checkpoint)."""

    def first_seq(self) -> int:
        """The seq of the oldest record still in the log (1 when it is empty)."""
        ...

    def has_news(self) -> bool:
        """A cheap check whether anything may have been appended or dropped since the last
        call (False only when nothing was; True may be a false alarm)."""
        ...

    def read_new(self) -> list[Record]:
        """Records after `last_seq`, in order; raises LogGap when some were dropped unread."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """The exclusive right to append (raises StoreBusy or StoreError when not had)."""
        ...

    def append(self, batches: Sequence[Sequence[Op]]) -> int:
        """Append one record per batch, durably and all together (caller holds `locked()`
        and has read to the end); returns the last seq. On OSError nothing was appended; on
        LogConflict neither (another replica appended first)."""
        ...

    def rotate(self) -> int:
        """Seal: records from now on go after a boundary a checkpoint can fold up to (caller
        holds `locked()` and has read to the end). Returns the next record's seq."""
        ...

    def sealed_records(self, after: int, through: int) -> Iterator[Record]:
        """The records with after < seq <= through still in the log (for a checkpoint)."""
        ...

    def drop_sealed(self, through: int) -> None:
        """Let go of records <= `through` (folded by a checkpoint), keeping a little for
        readers that are behind."""

"""Long-term memory: a durable log in front of LanceDB records and a Tantivy index.

Owns the `Log` contract (log.py) and its two implementations, the local write-ahead log
(wal.py) and the LanceDB log shared by replicas on object storage (shared/); the write
path (plans.py decides, group_commit.py appends); this process's copy and keeping it in step
with other processes (mirror.py, catchup.py); checkpoints that fold the log into LanceDB and
Tantivy (checkpoint.py, table_writes.py, state.py), repair and snapshots (repair.py,
snapshot.py, shared/snapshots.py); the LanceDB table and its files (lance_table.py,
lance_files.py); vectors and hybrid search (vectors.py, search.py). store.py's
`LongTermStore` is the door every caller uses; components.py is what its parts share.

May import: the stores root (model, errors, files, layout), stores.index, stores.remote.

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.stores.longterm.lance_table import has_log
    from dreamwell.stores.longterm.log import Record
    from dreamwell.stores.longterm.shared.log import reaching
    from dreamwell.stores.longterm.state import StateFile
    from dreamwell.stores.longterm.store import (
        ANY,
        CHECKPOINT_SECONDS,
        Hit,
        LongTermStore,
        SaveResult,
        Write,
    )
    from dreamwell.stores.longterm.wal import Wal, WalGap

_LAZY = {
    **dict.fromkeys(
        [
            "ANY",
            "CHECKPOINT_SECONDS",
            "Hit",
            "LongTermStore",
            "SaveResult",
            "Write",
        ],
        "store",
    ),
    "has_log": "lance_table",
    "reaching": "shared.log",
    "StateFile": "state",
    "Record": "log",
    **dict.fromkeys(
        [
            "Wal",
            "WalGap",
        ],
        "wal",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "ANY",
    "CHECKPOINT_SECONDS",
    "Hit",
    "LongTermStore",
    "Record",
    "SaveResult",
    "StateFile",
    "Wal",
    "WalGap",
    "Write",
    "has_log",
    "reaching",
]

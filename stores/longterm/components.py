"""What the parts of long-term memory share, gathered so each part takes one argument.

`Parts` owns nothing itself: it names the data directory, the log, the state file (which
checkpoint LanceDB and Tantivy hold, and the journal of what each wrote), LanceDB, Tantivy,
this process's mirror and its follower, `checkpoint.lock` (one checkpointer at a time), and
for a data directory on object storage the snapshots stored there. `stores/longterm/store.py`
makes it once per store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from filelock import FileLock

from dreamwell.stores.index.text_index import TextIndex
from dreamwell.stores.layout import DataDir
from dreamwell.stores.longterm.catchup import Follower
from dreamwell.stores.longterm.lance_table import MemoryTable
from dreamwell.stores.longterm.log import Log
from dreamwell.stores.longterm.mirror import Mirror
from dreamwell.stores.longterm.state import StateFile

if TYPE_CHECKING:
    from dreamwell.stores.longterm.shared.snapshots import SharedSnapshots


@dataclass(frozen=True)
class Parts:
    dirs: DataDir
    log: Log
    state: StateFile
    table: MemoryTable
    index: TextIndex
    mirror: Mirror
    follower: Follower
    cplock: FileLock
    lock_timeout: float
    shared: SharedSnapshots | None = None  # snapshots in the object store (remote only)

"""When the shared log's tables are compacted and their old versions removed: the log poller's
housekeeping (`stores/longterm/shared/log.py`, `LanceLog._watch`).

Every version of a log table costs a manifest and a transaction file of ~33 KB each (lancedb
0.40: each carries the 32 KB key filter of the `merge_insert` that made it), whatever the
append held. So what the log costs in objects and bytes is the versions kept, and three rules
keep them few:

- **Under appends**: after every COMPACT_EVERY versions of the newest table, the replica whose
  append is its latest version compacts it and removes the versions older than KEEP_VERSIONS.
- **At rest**: once the newest table has had no new version for KEEP_VERSIONS, and has had at
  least QUIET_VERSIONS since it was last tidied at rest, it is compacted and cleaned once more:
  a quiet log keeps a few versions, not the last burst's. (LanceDB removes versions only with a
  compaction, without pylance; a save now and then must not rewrite the table each time.)
- **A full generation**: once the log has moved on to a newer table, the older one gets no
  appends, so nothing under appends would tidy it; each replica compacts and cleans it after
  a few times KEEP_VERSIONS, then once more (nothing left to fold by then: only a cleanup),
  instead of keeping its last versions until a checkpoint drops it.

The replica that appended last tidies first; the others wait two to three times as long (a
random share, so they do not all start at once) and find it done: a compaction with nothing
to fold makes no version, nor does a cleanup, and a compaction that loses to a concurrent one
is harmless. Both are safe beside appends and reads (see log.py): a reader that checked out
a version removed meanwhile hears "Not found" and goes again afresh (`tables.cleaned_up`); a
writer checks out again first when its version may be that old (`log.FRESH_BASE`: LanceDB does
not always hear it, and once committed a second row for a number taken).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import timedelta

from dreamwell.stores.longterm.lance_table import LogTable
from dreamwell.stores.longterm.shared.tables import LogTables

logger = logging.getLogger(__name__)

COMPACT_EVERY = 16  # versions of the table (appends by any replica) between compactions
# versions younger than this survive a cleanup; what the log keeps under appends is about its
# version rate times this (plus COMPACT_EVERY). A reader or writer stalled for longer than
# this between checking out a version and using it fails once and tries again afresh. Three
# replicas saving back to back make ~30 versions a second: at 2 s the first 1,000 saves kept
# 3.4-6.8 KB a memory (issue 57 asks at most 5), at 1 s 3.6-4.4 KB, with no more saves refused
# (docs/benchmarks.md, "The shared log over time")
KEEP_VERSIONS = timedelta(seconds=1)
QUIET_VERSIONS = 4  # versions a quiet table may keep beyond a tidy at rest (~66 KB each)


class Tidier:
    """The poller's record of the newest table's versions, and its compactions."""

    def __init__(self, tables: LogTables, appended_last: Callable[[int, int], bool]) -> None:
        self.tables = tables
        self._mine = appended_last  # (gen, version) -> whether this replica's append made it
        self._gen = -1
        self._version = -1  # the newest table's version last seen, and since when (monotonic)
        self._since = time.monotonic()
        self._compacted = 0  # its version after the last compaction seen or done
        self._tidied = -1  # the version a quiet tidy left (none while appends go on)
        self._full: dict[int, tuple[float, int]] = {}  # older generations: (since, passes)
        self._patience = 2 + random.random()  # how much longer than the last appender waits
        self.compactions = 0  # done by this poller, each with its cleanup

    def saw(self, gen: int, table: LogTable | None, version: int) -> None:
        """The poller checked out generation `gen`'s table (None: not begun) at `version`."""
        now = time.monotonic()
        if gen != self._gen:
            for older in range(max(self._gen, gen - 2), gen):
                self._full.setdefault(older, (now, 2))
            self._gen, self._compacted, self._tidied = gen, version, -1
            self._version = -1
        if version != self._version:
            self._version, self._since = version, now
        if table is not None:
            mine = self._mine(gen, version)
            busy = mine and version - self._compacted >= COMPACT_EVERY
            waited = now - self._since >= self._wait(mine)
            quiet = waited and version - self._tidied >= QUIET_VERSIONS
            if (busy or quiet) and self._compact(table):
                self._compacted = self._version = table.latest()
                self._since = now
                if quiet:
                    self._tidied = self._version
        self._tidy_full(now)

    def _wait(self, mine: bool) -> float:
        seconds = KEEP_VERSIONS.total_seconds()
        return seconds if mine else seconds * self._patience

    def _tidy_full(self, now: float) -> None:
        """Compact and clean up each older generation once it has been full for long enough,
        and clean it once more as long again later: two replicas' compactions at once can
        leave a version made after the winner's cleanup (passed over if a checkpoint dropped
        the table meanwhile)."""
        for gen, (since, passes) in list(self._full.items()):
            if gen < 0 or now - since >= self._wait(False):
                del self._full[gen]
                if gen >= 0:
                    self.tables.read(gen, lambda table, _: self._compact(table))
                    self.tables.forget(gen)
                    if passes > 1:
                        self._full[gen] = (now, passes - 1)

    def _compact(self, table: LogTable) -> bool:
        """Fold the small fragments of appends together and remove old versions."""
        try:
            table.compact(KEEP_VERSIONS)
        except Exception as exc:  # another replica compacting: harmless, try next time
            logger.debug("compacting the log: %s", exc)
            return False
        self.compactions += 1
        return True

"""`longterm.state`: how far the write-ahead log has been folded into LanceDB and Tantivy.

    {"checkpoint": seq, "version": lancedb version, "generation": n,
     "journal": [[n, ids, version], ...]}

Written atomically by a checkpoint (under the write lock) after LanceDB and Tantivy hold every
record up to `checkpoint`. `journal` lists the ids each recent checkpoint wrote (and the
LanceDB version it left), so a process that lagged behind a deleted log segment reloads just
those ids from LanceDB, and a table found older than the state (its newest manifest lost)
names them. A damaged state file is kept aside and treated as "checkpoint unknown": the whole
log is replayed, which is safe because replaying records is idempotent.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path

from dreamwell.stores.files import keep_aside, write_atomic

logger = logging.getLogger(__name__)

_JOURNAL = 64  # checkpoints kept in the journal (a process further behind reloads everything)
_JOURNAL_IDS = 5000  # a checkpoint that wrote more ids says "reload everything"
_JOURNAL_TOTAL_IDS = 20_000  # ... and so do older checkpoints once the journal names this many
# (every process parses the file after each checkpoint: batch imports left 100,000 ids in it,
# 1.6 MB to parse and 6 MiB held per process)
_RECHECK_SECONDS = 0.25  # mtime ticks can be coarse: re-read now and then even if unchanged


def _keep_aside(path: Path, why: str) -> None:
    """Keep a damaged state file aside (stores/files.py); if even that fails (a read-only
    directory), say so and read on: the log is replayed either way."""
    try:
        keep_aside(path, why)
    except OSError as exc:
        logger.error("%s is damaged (%s) and could not be moved aside: %s", path, why, exc)


@dataclass(frozen=True)
class State:
    checkpoint: int = 0
    version: int = -1
    generation: int = 0
    journal: dict[int, list[str] | None] = field(default_factory=dict)
    known: bool = True  # False: the file was missing or damaged
    versions: dict[int, int] = field(default_factory=dict)  # generation -> LanceDB version

    def written_after(self, version: int) -> set[str] | None:
        """Ids the checkpoints that left a LanceDB version newer than `version` wrote (None
        when the journal does not say)."""
        ids: set[str] = set()
        for g in range(self.generation, 0, -1):
            if g not in self.versions or g not in self.journal:
                return None
            if self.versions[g] <= version:
                return ids
            changed = self.journal[g]
            if changed is None:
                return None
            ids.update(changed)
        return ids

    def changed_since(self, generation: int) -> set[str] | None:
        """Ids checkpointed after `generation`, or None when the journal does not cover them."""
        ids: set[str] = set()
        for g in range(generation + 1, self.generation + 1):
            changed = self.journal.get(g)
            if changed is None or generation < 0:
                return None
            ids.update(changed)
        return ids


class StateFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._read_at = 0.0
        # the last parse: (stamp, crc32 of the bytes, when checked, State)
        self._parsed: tuple[tuple[int, int, int], int, float, State] | None = None

    def unchanged(self) -> bool:
        """True when the file is as it was at the last check (a stat(), no parsing)."""
        try:
            st = self.path.stat()
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        now = time.monotonic()
        if stamp is not None and stamp == self._stamp and now - self._read_at < _RECHECK_SECONDS:
            return True
        self._stamp, self._read_at = stamp, now
        return False

    def read(self) -> State:
        """The state, parsed again only when the file changed: its journal lists thousands
        of ids and every write consults it. Unchanged = same stat() stamp; as timestamps are
        coarse and inodes reused, the bytes are compared (crc32) at least once a second."""
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return self._read(None)
        now = time.monotonic()
        cached = self._parsed
        if cached is not None and cached[0] == stamp and now - cached[2] < 1.0:
            return cached[3]
        try:
            data = self.path.read_bytes()
        except OSError:
            return self._read(None)
        crc = zlib.crc32(data)
        if cached is not None and cached[1] == crc:
            self._parsed = (stamp, crc, now, cached[3])
            return cached[3]
        state = self._read(data)
        self._parsed = (stamp, crc, now, state) if state.known else None
        return state

    def _read(self, data: bytes | None) -> State:
        if data is None:
            if not self.path.exists():
                return State(known=False)
            logger.error("cannot read %s", self.path)
            return State(known=False)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            _keep_aside(self.path, f"not UTF-8: {exc}")
            return State(known=False)
        try:
            parsed = json.loads(text)
            journal: dict[int, list[str] | None] = {}
            versions: dict[int, int] = {}
            for g, ids, *version in parsed.get("journal", []):  # version: since format 2.1
                journal[int(g)] = None if ids is None else [str(i) for i in ids]
                if version:
                    versions[int(g)] = int(version[0])
            return State(
                int(parsed.get("checkpoint", 0)),
                int(parsed["version"]),
                int(parsed["generation"]),
                journal,
                versions=versions,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            _keep_aside(self.path, f"not a state file: {exc}")
            return State(known=False)

    def write(self, old: State, checkpoint: int, version: int, touched: Set[str]) -> State:
        generation = old.generation + 1
        ids = sorted(touched) if len(touched) <= _JOURNAL_IDS else None
        journal = {g: c for g, c in old.journal.items() if g > generation - _JOURNAL}
        journal[generation] = ids
        named = 0
        for g in sorted(journal, reverse=True):  # newest first: older ones are dropped first
            named += len(journal[g] or ())
            if named > _JOURNAL_TOTAL_IDS:
                journal[g] = None
        versions = {g: v for g, v in old.versions.items() if g in journal}
        versions[generation] = version
        state = State(checkpoint, version, generation, journal, versions=versions)
        data = {
            "checkpoint": checkpoint,
            "version": version,
            "generation": generation,
            "journal": [
                [g, c, versions[g]] if g in versions else [g, c] for g, c in sorted(journal.items())
            ],
        }
        write_atomic(self.path, json.dumps(data))
        return state

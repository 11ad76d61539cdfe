"""The small files that let several processes share one data directory safely.

`longterm.state` holds the last writer's generation number, the LanceDB version it left and
which ids each recent generation changed, so a reader that notices a new generation (one
stat() per call) loads just those ids.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path

_JOURNAL = 256  # generations kept in the journal
_JOURNAL_IDS = 1000  # a generation that changed more ids says "reload everything"
_RECHECK_SECONDS = 0.25  # mtime ticks can be coarse: re-read now and then even if unchanged


def write_atomic(path: Path, text: str) -> None:
    """temp file + fsync + rename: readers see the old or the new file, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True)
class State:
    generation: int
    version: int
    journal: dict[int, list[str] | None]  # generation -> changed ids (None: too many)

    def changed_since(self, generation: int) -> set[str] | None:
        """Ids changed after `generation`, or None when the journal does not cover them."""
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

    def unchanged(self) -> bool:
        """True when the file is as it was at the last read (a stat(), no parsing)."""
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
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            journal = {
                int(g): (None if ids is None else [str(i) for i in ids])
                for g, ids in data.get("journal", [])
            }
            return State(int(data["generation"]), int(data["version"]), journal)
        except (OSError, ValueError, KeyError, TypeError):
            return State(-1, -1, {})

    def write(self, old: State, generation: int, version: int, touched: Set[str]) -> None:
        ids = sorted(touched) if len(touched) <= _JOURNAL_IDS else None
        journal = [[g, c] for g, c in sorted(old.journal.items()) if g > generation - _JOURNAL]
        journal.append([generation, ids])
        state = {"generation": generation, "version": version, "journal": journal}
        write_atomic(self.path, json.dumps(state))

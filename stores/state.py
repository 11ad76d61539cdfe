"""`longterm.state`: how far the write-ahead log has been folded into LanceDB and Tantivy.

    {"checkpoint": seq, "version": lancedb version, "generation": n, "journal": [[n, ids], ...]}

Written atomically by a checkpoint (under the write lock) after LanceDB and Tantivy hold every
record up to `checkpoint`. `journal` lists the ids each recent checkpoint wrote, so a process
that lagged behind a deleted log segment reloads just those ids from LanceDB. A damaged state
file is kept aside and treated as "checkpoint unknown": the whole log is replayed, which is
safe because replaying records is idempotent.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path

from dreamwell.stores.model import utcnow

logger = logging.getLogger(__name__)

_JOURNAL = 256  # checkpoints kept in the journal
_JOURNAL_IDS = 5000  # a checkpoint that wrote more ids says "reload everything"
_RECHECK_SECONDS = 0.25  # mtime ticks can be coarse: re-read now and then even if unchanged


def write_atomic(path: Path, text: str) -> None:
    """temp file + fsync + rename: readers see the old or the new file, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def keep_aside(path: Path, why: str) -> Path:
    """Rename a damaged file to `<name>.corrupt-<UTC time>` (never delete it) and log it."""
    kept = path.with_name(f"{path.name}.corrupt-{utcnow():%Y%m%dT%H%M%S}")
    try:
        os.replace(path, kept)
    except OSError as exc:
        logger.error("%s is damaged (%s) and could not be moved aside: %s", path, why, exc)
        return path
    logger.error("%s is damaged (%s); it was kept as %s", path, why, kept)
    return kept


@dataclass(frozen=True)
class State:
    checkpoint: int = 0
    version: int = -1
    generation: int = 0
    journal: dict[int, list[str] | None] = field(default_factory=dict)
    known: bool = True  # False: the file was missing or damaged

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
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return State(known=False)
        except OSError as exc:
            logger.error("cannot read %s: %s", self.path, exc)
            return State(known=False)
        try:
            data = json.loads(text)
            journal = {
                int(g): (None if ids is None else [str(i) for i in ids])
                for g, ids in data.get("journal", [])
            }
            return State(
                int(data.get("checkpoint", 0)),
                int(data["version"]),
                int(data["generation"]),
                journal,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            keep_aside(self.path, f"not a state file: {exc}")
            return State(known=False)

    def write(self, old: State, checkpoint: int, version: int, touched: Set[str]) -> State:
        generation = old.generation + 1
        ids = sorted(touched) if len(touched) <= _JOURNAL_IDS else None
        journal = {g: c for g, c in old.journal.items() if g > generation - _JOURNAL}
        journal[generation] = ids
        state = State(checkpoint, version, generation, journal)
        data = {
            "checkpoint": checkpoint,
            "version": version,
            "generation": generation,
            "journal": [[g, c] for g, c in sorted(journal.items())],
        }
        write_atomic(self.path, json.dumps(data))
        return state

"""The dream's back-off between cycles (docs/dreaming.md): a cycle whose LLM failed (its questions
stopped by the breaker, dream/budget.py) adds one to the failures in a row kept in the data
directory (`DataDir.dream_backoff`); a cycle whose LLM answered clears them. The dream that
starts by itself (server/auto_dream.py) waits `dream_auto_after` doubled for each failure in a
row, at most `CAP` (or `dream_auto_after` when that is longer).

Cheap to read: the standard library and the data directory's layout, nothing more."""

from __future__ import annotations

import json
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from dreamwell.stores import DataDir, write_atomic

CAP = 7 * 86400.0  # the longest wait between automatic cycles a failing LLM causes


@dataclass(frozen=True)
class Backoff:
    failures: int = 0  # cycles in a row whose LLM failed
    cause: str = ""  # the last one's failure
    at: float = 0.0  # when it was written


def read(data_dir: Path) -> Backoff:
    """The failures in a row (none when the file is missing or unreadable)."""
    try:
        data = json.loads(DataDir(data_dir).dream_backoff.read_text(encoding="utf-8"))
        return Backoff(int(data["failures"]), str(data.get("cause", "")), float(data["at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Backoff()


def record(data_dir: Path, cause: str) -> Backoff:
    """After a cycle: `cause` is its LLM's failure ('' when the LLM answered)."""
    path = DataDir(data_dir).dream_backoff
    if not cause:
        with suppress(FileNotFoundError):
            path.unlink()
        return Backoff()
    now = Backoff(read(data_dir).failures + 1, cause, time.time())
    write_atomic(path, json.dumps({"failures": now.failures, "cause": cause, "at": now.at}))
    return now


def wait(after: float, failures: int) -> float:
    """Seconds between automatic cycles after `failures` failed ones in a row."""
    if failures <= 0:
        return after
    return min(after * 2.0 ** min(failures, 60), max(CAP, after))

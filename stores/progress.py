"""How far a long job of another process has got (an import's "1,200 of 5,000"), for a page
in a different process to show.

The job holds a file lock for as long as it runs and rewrites a small JSON marker as it goes;
a reader shows the marker only while that lock is held. A job that was killed leaves its
marker behind, but its lock goes with the process, so the reader sees it as over at once (no
process id to be reused, no timeout to guess). The reader only tries the lock, never waits.

    with report_progress(dirs.import_progress, dirs.import_lock) as report:
        report(done, total)
    progress_of(dirs.import_progress, dirs.import_lock)  # {"done", "total", ...} or None
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from dreamwell.stores.files import write_atomic

logger = logging.getLogger(__name__)

ProgressReport = Callable[[int, int], None]  # (done, total)
START_WAIT = 0.5  # seconds a job waits for the lock a reader may be trying that instant


@contextlib.contextmanager
def report_progress(marker: Path, lock: Path) -> Iterator[ProgressReport]:
    """Report progress to `marker` while the body runs; the marker is removed at the end.
    Never fails the job: when the lock is held by another job of the same kind (it reports
    instead) or the directory cannot be written, the reports go nowhere."""
    held = FileLock(str(lock), timeout=START_WAIT)
    try:
        held.acquire()
    except (Timeout, OSError) as exc:
        logger.debug("progress not reported to %s: %s", marker, exc)
        yield lambda done, total: None
        return
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def report(done: int, total: int) -> None:
        body = {"pid": os.getpid(), "started": started, "done": done, "total": total}
        try:
            write_atomic(marker, json.dumps(body))
        except OSError as exc:  # a full disk must not stop the job itself
            logger.debug("progress not written to %s: %s", marker, exc)

    try:
        yield report
    finally:
        with contextlib.suppress(OSError):
            marker.unlink()
        held.release()


def progress_of(marker: Path, lock: Path) -> dict[str, Any] | None:
    """The marker of a job that is still running, or None: no marker, or one whose job is
    gone (its lock is free), or one that cannot be read."""
    try:
        body = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not _held(lock):
        return None
    return body


def _held(lock: Path) -> bool:
    """Whether a live process holds `lock` (tried without waiting, released at once)."""
    probe = FileLock(str(lock), timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return True
    except OSError:
        return False
    probe.release()
    return False

"""Files in the data directory: written atomically (`write_atomic`: readers see the old or the
new file, never half of one), and a file that cannot be read back kept aside under a new name
(`keep_aside`), never overwritten."""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime
from pathlib import Path

from dreamwell.stores.model import utcnow

logger = logging.getLogger(__name__)


def aside_name(path: Path, now: datetime | None = None) -> Path:
    """`<name>.corrupt-<UTC time>`, with a counter if that name is taken."""
    stamp = (now or utcnow()).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    return target


def keep_aside(path: Path, why: str) -> Path | None:
    """Rename a damaged file out of the way (the caller holds the file's write lock) and say so
    in the log; returns the new path (None if the file was already gone)."""
    target = aside_name(path)
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    logger.error("%s is damaged (%s); kept it as %s", path, why, target.name)
    return target


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

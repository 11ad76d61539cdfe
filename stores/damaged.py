"""A file that cannot be read back is kept aside under a new name, never overwritten."""

from __future__ import annotations

import logging
import os
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

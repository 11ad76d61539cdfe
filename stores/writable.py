"""Why the data directory refused a write, in words a user can act on: a read-only mount
(where `chown` cannot help), a permissions problem, a full disk."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path


def read_only_mount(path: Path) -> bool:
    """Whether `path` (or, if it does not exist, its nearest existing parent) lies on a file
    system mounted read-only."""
    for candidate in (path, *path.parents):
        try:
            return bool(os.statvfs(candidate).f_flag & os.ST_RDONLY)
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return False


def mount_point(path: Path) -> Path:
    """The mount point holding `path`: the longest one in /proc/self/mountinfo that contains
    it (a bind mount has its source's device number, so st_dev cannot tell), else the nearest
    parent on another device."""
    path = path.resolve()
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    points = [Path(_unescape(line.split()[4])) for line in lines if len(line.split()) > 4]
    found = [p for p in points if path == p or p in path.parents]
    if found:
        return max(found, key=lambda p: len(p.parts))
    device = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def advice(path: Path, exc: OSError) -> str:
    """The cause of a refused write under `path` and what to do, to end a one-line message."""
    if exc.errno == errno.EROFS or read_only_mount(path):
        return (
            "the data directory is on a read-only mount: reads still work; remount it "
            "read-write or give a writable --data-dir to write"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"{exc.strerror}: this user may not write the data directory; check its owner "
            "and permissions"
        )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{exc.strerror}: make free space on the data directory's disk"
    return f"{exc.strerror or exc}: check the data directory's free space and permissions"

"""Files in the data directory: written atomically (`write_atomic`: readers see the old or the
new file, never half of one), and a file that cannot be read back kept aside under a new name
(`keep_aside`), never overwritten.

They are the user's alone: folders 0700, files 0600. `write_atomic` creates its files 0600;
every entry point sets the umask `PRIVATE_UMASK` (so that what LanceDB, Tantivy and sqlite
create is private too); `make_private` tightens a tree written before (docs/data-directory.md)."""

from __future__ import annotations

import logging
import os
import stat
import threading
from datetime import datetime
from pathlib import Path

from dreamwell.stores.model import utcnow

logger = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077  # the entry points' `os.umask(0o077)`: new files 0600, folders 0700
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


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
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def make_private(root: Path) -> int:
    """Take group and other users' access away from `root` and everything under it that this
    user owns (symbolic links are left alone, and never followed); the number of paths changed.
    A path that cannot be changed (a read-only disk, another owner's) is skipped."""
    if os.name != "posix":
        return 0  # Windows: a user's profile folder is private by its ACL
    changed = int(_private(root))
    for folder, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            changed += _private(Path(folder, name))
    return changed


def _private(path: Path) -> bool:
    try:
        found = os.lstat(path)
        if stat.S_ISLNK(found.st_mode) or not found.st_mode & _OTHERS:
            return False
        if found.st_uid != os.geteuid():
            return False
        os.chmod(path, stat.S_IMODE(found.st_mode) & ~_OTHERS)
    except OSError:
        return False
    return True

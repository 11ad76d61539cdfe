"""Files in the data directory: written atomically (`write_atomic`: readers see the old or the
new file, never half of one), and a file that cannot be read back kept aside under a new name
(`keep_aside`), never overwritten; and paths the user names (`user_output`: an export's
`-o`), written through a symlink, device or FIFO as meant, never renamed over.

They are the user's alone: folders 0700, files 0600. `write_atomic` creates its files 0600;
every entry point sets the umask `PRIVATE_UMASK` (so that what LanceDB, Tantivy and sqlite
create is private too); `make_private` tightens a tree written before (docs/data-directory.md)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO

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


class NotWritable(OSError):
    """A path the user named that cannot take a file (a directory, a socket): the text says
    which and what to do."""


@contextlib.contextmanager
def user_output(path: Path) -> Iterator[IO[str]]:
    """Write a path the user named, as they meant it: through a symlink to its target, into
    a device or a FIFO directly (never renamed over: `-o /dev/null` run as root must not
    replace the machine's /dev/null), and a regular file whole or not at all (a hidden file
    beside it, renamed over it once complete). A directory or a socket raises NotWritable."""
    real = Path(os.path.realpath(path))
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise NotWritable(f"cannot write {path}: it is a directory; name a file in it")
    if mode is not None and stat.S_ISSOCK(mode):
        raise NotWritable(f"cannot write {path}: it is a socket; name a file")
    if mode is not None and not stat.S_ISREG(mode):  # a device or a FIFO: write through it
        with open(real, "w", encoding="utf-8") as out:
            yield out
        return
    partial = real.with_name(f".{real.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            shutil.copymode(real, partial)  # keep the mode the user gave the file
        os.replace(partial, real)
    finally:
        partial.unlink(missing_ok=True)


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

"""Where working memory keeps its segments: files in the data directory, or objects in the
object store when the data directory caches one (`DataDir.remote`).

A segment (`session`, `patrol`, `subagent`) is one JSON document. Both kinds offer the same
four things, which is all `WorkingMemory` needs:

- `stamp(top)`: a cheap token that changes whenever the segment does (a file's mtime and
  size; an object's ETag, asked of the store at most every `CHECK_SECONDS`, so a reader sees
  another replica's write within that plus one round trip, without a request on every call);
- `read(top)`: the bytes (None when absent) and their stamp;
- `rewrite(top, change)`: `change(bytes_or_None, stamp) -> new bytes`, applied atomically
  against concurrent writers (files: under a cross-process file lock; objects: written only
  if still the version read, else read and changed again, `Blobs.update`); returns the new
  stamp. `change` may be called more than once and must depend only on its arguments;
- `keep_aside(top, data, why)`: keep a damaged segment where nothing reads it.

An object segment's version check never holds a read up: the read that starts one waits for
it at most READ_WAIT seconds, reads arriving meanwhile do not wait, and a store that fails or
hangs leaves reads with the version this replica last saw (its own writes included) and is
asked again only after BACKOFF_SECONDS.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from filelock import FileLock, Timeout

from dreamwell.stores.errors import StoreBusy, StoreError, StoreUnreachable, WriteFailed
from dreamwell.stores.files import keep_aside, write_atomic
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import utcnow
from dreamwell.stores.writable import advice

if TYPE_CHECKING:
    from dreamwell.stores.remote.blobs import Blobs

logger = logging.getLogger(__name__)

CHECK_SECONDS = 0.25  # an object segment's version is asked of the store at most this often
READ_WAIT = 0.5  # seconds a read waits for the version check it started
BACKOFF_SECONDS = 5.0  # after a failed check, the store is asked again only this much later
Change = Callable[[bytes | None, Hashable], bytes]


class Segments(Protocol):
    def stamp(self, top: str) -> Hashable: ...

    def read(self, top: str) -> tuple[bytes | None, Hashable]: ...

    def rewrite(self, top: str, change: Change) -> Hashable: ...

    def keep_aside(self, top: str, data: bytes | None, why: str) -> None: ...

    def where(self, top: str) -> str: ...


def segments_for(data_dir: Path, lock_timeout: float = 15.0) -> FileSegments | BlobSegments:
    dirs = DataDir(data_dir)
    remote = dirs.remote
    if remote is None:
        return FileSegments(dirs.working, lock_timeout)
    from dreamwell.stores.remote.blobs import Blobs

    return BlobSegments(Blobs(remote, dirs.working.name))


class FileSegments:
    """`working-memory/<top>.json`, rewritten tmp + fsync + rename under `.lock`."""

    def __init__(self, folder: Path, lock_timeout: float) -> None:
        self.folder = folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only data directory still serves reads
            logger.warning("cannot create %s (%s); working memory is read-only", folder, exc)
        self.lock = FileLock(str(folder / ".lock"), timeout=lock_timeout)

    def _path(self, top: str) -> Path:
        return self.folder / f"{top}.json"

    def where(self, top: str) -> str:
        return str(self._path(top))

    def stamp(self, top: str) -> Hashable:
        try:
            st = self._path(top).stat()
            return (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            return (0, 0)

    def read(self, top: str) -> tuple[bytes | None, Hashable]:
        stamp = self.stamp(top)
        if stamp == (0, 0):
            return None, stamp
        try:
            return self._path(top).read_bytes(), stamp
        except FileNotFoundError:
            return None, (0, 0)
        except OSError as exc:  # served as a damaged segment (nothing readable)
            return f"unreadable: {exc}".encode(), stamp

    def rewrite(self, top: str, change: Change) -> Hashable:
        path = self._path(top)
        try:
            self.lock.acquire()
        except Timeout as exc:
            raise StoreBusy("working memory is locked by another process; try again.") from exc
        except OSError as exc:
            raise WriteFailed(
                f"working memory cannot be locked for writing in {self.folder} "
                f"({advice(self.folder, exc)}). Nothing was saved."
            ) from exc
        try:
            data, stamp = self.read(top)
            new = change(data, stamp)
            try:
                write_atomic(path, new.decode("utf-8"))
            except OSError as exc:
                for tmp in path.parent.glob(f".{path.name}.{os.getpid()}.*.tmp"):
                    tmp.unlink(missing_ok=True)
                raise WriteFailed(
                    f"working memory could not be written to {path} ({advice(path, exc)}). "
                    "Nothing was saved."
                ) from exc
            return self.stamp(top)
        finally:
            self.lock.release()

    def keep_aside(self, top: str, data: bytes | None, why: str) -> None:
        try:
            keep_aside(self._path(top), why)
        except OSError as exc:
            raise WriteFailed(
                f"working memory could not be written to {self.folder} "
                f"({advice(self.folder, exc)}). Nothing was saved."
            ) from exc


class BlobSegments:
    """`<location>/working-memory/<top>.json` objects, replaced with compare-and-set."""

    def __init__(self, blobs: Blobs) -> None:
        self.blobs = blobs
        self._mutex = threading.Lock()
        self._known: dict[str, tuple[float, Hashable]] = {}  # top -> (checked at, version)
        self._checking: dict[str, threading.Thread] = {}  # version checks under way

    def where(self, top: str) -> str:
        return f"{self.blobs.remote.uri}/{self.blobs.folder}/{top}.json"

    def _remember(self, top: str, version: Hashable, at: float | None = None) -> Hashable:
        with self._mutex:
            self._known[top] = (time.monotonic() if at is None else at, version)
        return version

    def stamp(self, top: str) -> Hashable:
        with self._mutex:
            known = self._known.get(top)
        if known is not None and time.monotonic() - known[0] < CHECK_SECONDS:
            return known[1]
        with self._mutex:
            check = self._checking.get(top)
            if check is None or not check.is_alive():
                held = known[1] if known is not None else None
                check = self._checking[top] = threading.Thread(
                    target=self._check, args=(top, held), name="dreamwell-wm-check", daemon=True
                )
                check.start()
                waited = check
            else:
                waited = None  # another read asked: serve what is held
        if waited is not None:  # not at all while another call to the store hangs
            from dreamwell.stores.remote.blobs import hung

            waited.join(0 if hung(self.blobs.remote, READ_WAIT) else READ_WAIT)
        with self._mutex:
            found = self._known.get(top)
        if found is None:  # never seen, and the store has not told yet
            raise StoreUnreachable(
                f"cannot read {self.where(top)}: the object store did not answer in time"
            )
        return found[1]

    def _check(self, top: str, held: Hashable) -> None:
        try:
            self._remember(top, self.blobs.version(f"{top}.json"))
        except StoreError as exc:
            logger.warning("serving the working memory this replica holds: %s", exc)
            with self._mutex:
                if top not in self._known:
                    return  # nothing held: readers hear the store is unreachable
            self._remember(top, held, time.monotonic() + BACKOFF_SECONDS - CHECK_SECONDS)

    def read(self, top: str) -> tuple[bytes | None, Hashable]:
        found = self.blobs.read(f"{top}.json")
        version = found[1] if found else None
        self._remember(top, version)
        return (found[0] if found else None), version

    def rewrite(self, top: str, change: Change) -> Hashable:
        written = self.blobs.update_versioned(f"{top}.json", change)
        assert written is not None  # `change` always returns bytes
        return self._remember(top, written[1])

    def keep_aside(self, top: str, data: bytes | None, why: str) -> None:
        if data is None:
            return
        name = f"{top}.json.corrupt-{utcnow():%Y%m%dT%H%M%S%fZ}"
        self.blobs.write(name, data, None)
        logger.error("%s is damaged (%s); kept it as %s", self.where(top), why, name)

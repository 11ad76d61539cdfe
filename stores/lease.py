"""Work that one process at a time may do on a store (a dream cycle, later enrichment and
backfill): a file lock on a local data directory, a lease object on an object store.

    with exclusive(data_dir, "dream"):   # raises Held when another process has it
        ...
    with claimed(dirs.backfill_lock) as mine:   # work another process is doing is skipped
        if mine:
            ...

The lease is the object `leases/<name>.json` = `{"holder", "expires"}` (seconds since the
epoch). It is taken by creating the object (`If-None-Match: *`: exactly one of racing
replicas wins), or, once the holder's expiry has passed (the holder died without releasing
it), by replacing exactly the expired version it read (`If-Match`): again one winner. While
held, a thread renews it every third of its time to live, each renewal replacing exactly the
version this holder wrote; release writes an expired lease the same way, so a release can
never clear a lease somebody else took over. Expiry compares the holder's clock with the
taker's: clocks need to agree to well within the time to live (60 s by default).

A holder that was paused past its expiry (a frozen process, a long GC, a suspended VM) must not
go on writing after another took over: `exclusive` yields a `confirm` to call before each
batch of writes. On a lease it renews synchronously, replacing exactly the version this holder
wrote (`If-Match`), and raises `LeaseLost` when that fails because somebody took it over. A
batch that follows a successful `confirm` runs with at least the time to live left, so a
second holder can only appear if the batch then stalls for longer than that between the
confirm and its commit (and even then every write is compare-and-set: nothing is lost).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from dreamwell.stores.errors import StoreError
from dreamwell.stores.layout import DataDir

if TYPE_CHECKING:
    from dreamwell.stores.remote.blobs import Blobs

logger = logging.getLogger(__name__)

TTL_SECONDS = 60.0
FOLDER = "leases"


class Held(StoreError):
    """Another process holds the lease (or the lock) for this work."""


class LeaseLost(StoreError):
    """Another holder took the lease over: the work must stop before its next write."""


Confirm = Callable[[], None]  # raises LeaseLost when the work no longer holds its lease


class Lease:
    """One lease object; `acquire` never waits."""

    def __init__(self, blobs: Blobs, name: str, ttl: float = TTL_SECONDS) -> None:
        self.blobs = blobs
        self.name = f"{name}.json"
        self.ttl = ttl
        self.holder = uuid.uuid4().hex
        self.version: str | None = None  # the version this holder wrote last
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost = threading.Event()  # set when a renewal found the lease taken over
        self._writing = threading.Lock()  # one renewal at a time (the renewer or `confirm`)

    def _body(self, expires: float) -> bytes:
        return json.dumps({"holder": self.holder, "expires": expires}).encode()

    def acquire(self) -> bool:
        """True when this holder now has the lease (and renews it until `release`)."""
        from dreamwell.stores.remote.blobs import CREATE, Conflict

        for _ in range(3):  # the object may vanish or expire between the steps
            found = self.blobs.read(self.name)
            if found is not None and _expires(found[0]) > time.time():
                return False
            expect = CREATE if found is None else found[1]
            try:
                self.version = self.blobs.write(self.name, self._body(self._until()), expect)
            except Conflict:
                continue
            self._stop.clear()
            self._renewer = threading.Thread(target=self._renew, daemon=True, name="lease")
            self._renewer.start()
            return True
        return False

    def _until(self) -> float:
        return time.time() + self.ttl

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.renew()
            except LeaseLost:
                return
            except StoreError as exc:  # unreachable for now: the next renewal tries again
                logger.warning("could not renew the lease %s: %s", self.name, exc)

    def renew(self) -> None:
        """Extend the lease by its time to live, replacing exactly the version this holder
        wrote; raises LeaseLost (and sets `lost`) when another holder took it over."""
        from dreamwell.stores.remote.blobs import Conflict

        with self._writing:
            if self.lost.is_set() or self.version is None:
                raise LeaseLost(f"the lease {self.name} was taken over by another replica")
            try:
                self.version = self.blobs.write(self.name, self._body(self._until()), self.version)
            except Conflict:
                logger.error("the lease %s/%s was taken over", self.blobs.folder, self.name)
                self.lost.set()
                raise LeaseLost(
                    f"the lease {self.name} was taken over by another replica"
                ) from None

    def release(self) -> None:
        from dreamwell.stores.remote.blobs import Conflict

        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if self.version is None or self.lost.is_set():
            return
        try:
            self.blobs.write(self.name, self._body(0.0), self.version)
        except (Conflict, StoreError) as exc:  # taken over, or it expires by itself
            logger.warning("could not release the lease %s: %s", self.name, exc)
        self.version = None


def _expires(data: bytes) -> float:
    """A lease's expiry; an unreadable lease counts as expired (it can be replaced)."""
    try:
        return float(json.loads(data)["expires"])
    except (ValueError, KeyError, TypeError):
        return 0.0


@contextmanager
def claimed(lock: Path) -> Iterator[bool]:
    """Hold the file lock `lock` for the block if no other process holds it, without waiting:
    the block gets whether this process holds it (False: another does the work; skip it)."""
    flock = FileLock(str(lock), timeout=0)
    try:
        flock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        flock.release()


def _held_locally() -> None:
    """A file lock cannot be taken over while its holder lives: nothing to confirm."""


@contextmanager
def exclusive(data_dir: Path, name: str, lock: Path, what: str) -> Iterator[Confirm]:
    """Hold the work `name` on this store for the block, or raise Held ("`what` is already
    running ...") at once. Local: the file lock `lock`; remote: the lease `name`. The block
    gets a `confirm` to call before each batch of writes (see the module's docstring)."""
    dirs = DataDir(data_dir)
    remote = dirs.remote
    if remote is None:
        with claimed(lock) as mine:
            if not mine:
                raise Held(f"{what} is already running on this data directory")
            yield _held_locally
        return
    from dreamwell.stores.remote.blobs import Blobs

    lease = Lease(Blobs(remote, FOLDER), name, TTL_SECONDS)
    if not lease.acquire():
        raise Held(f"{what} is already running on another replica of {remote.uri}")
    try:
        yield lease.renew
    finally:
        lease.release()

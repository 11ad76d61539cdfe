"""Long-term snapshots in the object store, and a replica's cache rebuilt from them.

A remote data directory keeps the snapshots of `stores/longterm/snapshot.py` as objects
`snapshot/<seq:020d>.gz` (each written once, `If-None-Match: *`; the two newest are kept). The
shared log (`stores/longterm/shared/log.py`) drops records only below a stored snapshot, so the
newest snapshot plus the log after it hold every memory. A replica whose local cache is behind the
log's first record (new, or away for long) rebuilds its cache from them: the entries of the
snapshot go into its LanceDB (keeping the vectors it has of the same text), its checkpoint
moves to the snapshot's seq, and it reads the log from there.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from filelock import Timeout

from dreamwell.stores.errors import StoreBusy, StoreError
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.table_writes import kept_rows
from dreamwell.stores.remote.blobs import CREATE, Blobs, Conflict
from dreamwell.stores.remote.location import Remote

logger = logging.getLogger(__name__)

PREFIX = "snapshot/"
KEEP = 2
_FRESH_SECONDS = 2.0  # how long the newest seq listed is taken as current


class SharedSnapshots:
    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.blobs = Blobs(remote, PREFIX.rstrip("/"))
        self._latest: tuple[float, int | None] = (0.0, None)

    def _names(self) -> list[int]:
        seqs = []
        for name in self.blobs.names():
            if name.endswith(".gz") and name[:-3].isdigit():
                seqs.append(int(name[:-3]))
        return sorted(seqs)

    def latest(self) -> int | None:
        at, seq = self._latest
        if time.monotonic() - at < _FRESH_SECONDS:
            return seq
        names = self._names()
        seq = names[-1] if names else None
        self._latest = (time.monotonic(), seq)
        return seq

    def upload(self, path: Path, seq: int) -> None:
        """Store the local snapshot file `path` (covering `seq`), then drop older ones."""
        with contextlib.suppress(Conflict):  # another replica stored this seq: the same records
            self.blobs.write(f"{seq:020d}.gz", path.read_bytes(), CREATE)
        self._latest = (time.monotonic(), max(seq, self._latest[1] or 0))
        for old in self._names()[:-KEEP]:
            self.blobs.delete(f"{old:020d}.gz")

    def fetch(self, seq: int, dest: Path) -> snapshot.Snapshot:
        found = self.blobs.read(f"{seq:020d}.gz")
        if found is None:
            raise StoreError(f"snapshot {seq} is missing from {self.remote.uri}")
        tmp = dest.with_name(f".{dest.name}.fetch")
        tmp.write_bytes(found[0])
        tmp.replace(dest)
        loaded = snapshot.read(dest)
        if loaded is None or loaded.seq != seq:
            raise StoreError(f"snapshot {seq} in {self.remote.uri} is unreadable")
        return loaded


class CacheKeeper:
    """Keeps a replica's cache within reach of the shared log: rebuilt from the newest
    snapshot when the log no longer holds the records after the cache's checkpoint."""

    def __init__(self, parts: Parts, shared: SharedSnapshots) -> None:
        self.parts = parts
        self.shared = shared

    def behind(self) -> bool:
        state = self.parts.state.read()
        return (state.checkpoint if state.known else 0) < self.parts.log.first_seq() - 1

    def ensure(self) -> None:
        """Rebuild the cache if it is behind (under the cache's checkpoint lock), then load.
        The checkpoint lock is taken without waiting: a saver reaches here holding the log's
        lock, which comes after it (checkpoint -> log -> view), so it must not wait for a
        thread that holds the checkpoint lock and waits for the log's. It hears StoreBusy and
        its save is refused, not lost; the rebuild under way lets the next one through."""
        p = self.parts
        if not self.behind():
            return
        try:
            p.cplock.acquire(timeout=0)
        except Timeout:
            raise StoreBusy(
                f"this replica of {self.shared.remote.uri} is rebuilding its cache (the shared "
                "log was trimmed past what it had read); try again in a few seconds"
            ) from None
        try:
            if self.behind():
                self._rebuild()
            p.follower.load()
            live = [e for e in p.mirror.view.values() if e.live]
            p.index.rebuild(p.mirror.doc(e) for e in live)
            with p.log.locked():
                state = p.state.read()
                p.state.write(state, state.checkpoint, p.table.version, set())
        finally:
            p.cplock.release()
        p.follower.catch_up()

    def _rebuild(self) -> None:
        p = self.parts
        self.shared._latest = (0.0, None)
        seq, first = self.shared.latest(), p.log.first_seq()
        if seq is None or seq < first - 1:
            raise StoreError(
                f"the log in {self.shared.remote.uri} starts at record {first}, but no stored "
                "snapshot covers the records before it; restore the snapshot/ objects from a backup"
            )
        started = time.perf_counter()
        snap = self.shared.fetch(seq, p.dirs.snapshot)
        present = {e.id for e in p.table.entries()}
        p.table.delete(sorted(present - snap.entries.keys()))
        p.table.upsert(list(kept_rows(p, dict(snap.entries)).values()))
        with p.log.locked():
            p.state.write(p.state.read(), seq, p.table.version, present | snap.entries.keys())
        logger.warning(
            "rebuilt this replica's cache of %s from snapshot %d (%d memories) in %.1f s",
            self.shared.remote.uri,
            seq,
            len(snap.entries),
            time.perf_counter() - started,
        )

"""The write-ahead log of long-term writes: the only thing a save waits for.

One commit is one line, `<crc32 hex> <json>\\n`, whose JSON is `{"s": seq, "ops": [...]}`:
a commit's operations (a merge and the archiving of its sources, say) land together or not
at all. Writers append under the store's write lock with a single write() and an fsync.
Any process reads the log without a lock: a line still being written has no newline or a
bad checksum at the end and is simply not read yet.

Segments are files `wal/<first seq>.log`. A checkpoint seals the newest segment by starting
a new one (under the write lock), folds the sealed ones into LanceDB and Tantivy, and then
deletes all but the most recent sealed segment. A reader that finds a gap in the sequence
(it lagged behind a deleted segment) says so, and the store reloads what it missed.

This is the local implementation of `stores/longterm/log.py`'s `Log`; `write.lock` (a file lock)
gives one writer at a time the right to append.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import threading
import zlib
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path

from filelock import FileLock, Timeout

from dreamwell.stores.errors import StoreBusy, StoreError
from dreamwell.stores.files import keep_aside
from dreamwell.stores.longterm.log import LogGap, Op, Record
from dreamwell.stores.model import utcnow

logger = logging.getLogger(__name__)

_SUFFIX = ".log"
WalGap = LogGap  # the name this module has always raised


def _frame(seq: int, ops: Sequence[Op]) -> bytes:
    body = json.dumps({"s": seq, "ops": list(ops)}, separators=(",", ":")).encode("ascii")
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _parse(line: bytes) -> Record | None:
    """The record of one complete line, or None when it is damaged."""
    try:
        crc, body = line[:8], line[9:]
        if line[8:9] != b" " or int(crc, 16) != zlib.crc32(body):
            return None
        data = json.loads(body)
        return Record(int(data["s"]), list(data["ops"]))
    except (ValueError, KeyError, TypeError):
        return None


def segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}{_SUFFIX}"


_POLL = 0.005  # seconds between tries of a file lock another process holds
_process_locks: dict[str, threading.RLock] = {}
_process_locks_guard = threading.Lock()


def _process_lock(lock_file: str) -> threading.RLock:
    """The one thread lock of this process for `lock_file` (every Wal of it shares it)."""
    key = os.path.abspath(lock_file)
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.RLock())


class Wal:
    """One process's view of the log: where it has read up to, and how to append."""

    def __init__(self, folder: Path, lock_file: Path | None = None, timeout: float = 15.0) -> None:
        """`lock_file`: the writers' lock (`write.lock` in the data directory); without one
        the log can be read but `locked()` refuses."""
        self.folder = folder
        self._flock = FileLock(str(lock_file), timeout=timeout) if lock_file else None
        self._in_process = _process_lock(str(lock_file)) if lock_file else None
        self._timeout = timeout
        self._folder_stamp = 0
        self.last_seq = 0  # the last record read (or, before any, the checkpoint)
        self._segment: int | None = None  # first seq of the segment being read
        self._fd: int | None = None
        self._offset = 0  # end of the last complete line read in that segment
        self._damaged_reported: set[tuple[int, int]] = set()
        # One process's threads share this reader: searches check for news (has_unread) and
        # catch up, the checkpoint thread rotates segments, the group-commit leader appends.
        # Each of those holds this lock, so no thread uses a descriptor another is closing
        # (EBADF, or a reused number) and none reads a record half-appended or cut back.
        self._lock = threading.RLock()

    # ---- segments -------------------------------------------------------------------------
    def segments(self) -> list[int]:
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
                out.append(int(name[: -len(_SUFFIX)]))
        return sorted(out)

    def path(self, first_seq: int) -> Path:
        return self.folder / segment_name(first_seq)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
            self._fd, self._segment, self._offset = None, None, 0

    def start_at(self, seq: int) -> None:
        """Read records after `seq` from now on (used after loading a checkpoint)."""
        with self._lock:
            self.close()
            self.last_seq = seq

    def first_seq(self) -> int:
        segments = self.segments()
        return segments[0] if segments else 1

    def has_news(self) -> bool:
        """The folder changed (a segment added or deleted) or the segment being read grew:
        a few stat() calls when nothing changed."""
        try:
            stamp = self.folder.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = 0
        moved = stamp != self._folder_stamp
        self._folder_stamp = stamp
        return moved or self.has_unread()

    def has_unread(self) -> bool:
        """Cheap check (one fstat) for bytes appended to the segment being read."""
        with self._lock:
            if self._fd is None:
                return bool(self.segments())
            return os.fstat(self._fd).st_size > self._offset

    # ---- reading ----------------------------------------------------------------------------
    def read_new(self) -> list[Record]:
        """Records after `last_seq`, in order; raises WalGap when some were deleted unread."""
        with self._lock:
            return self._read_new()

    def _read_new(self) -> list[Record]:
        out: list[Record] = []
        while True:
            if self._fd is None and not self._open_next():
                return out
            out += self._read_segment()
            later = [s for s in self.segments() if self._segment is not None and s > self._segment]
            if not later:
                return out
            # a newer segment exists, so this one is sealed: read it to the end, then move on
            out += self._read_segment()
            self.close()

    def _open_next(self) -> bool:
        segments = self.segments()
        wanted = self.last_seq + 1
        holding = [s for s in segments if s <= wanted]
        if holding:
            first = holding[-1]
        elif segments:
            if segments[0] > wanted:
                raise WalGap(f"records {wanted}..{segments[0] - 1} are no longer in the log")
            return False
        else:
            return False
        try:
            self._fd = os.open(self.path(first), os.O_RDONLY)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(os.fstat(self._fd).st_mode):  # a directory where a segment was
            os.close(self._fd)
            self._fd = None
            keep_aside(self.path(first), "a directory, not a log segment")
            return self._open_next()
        self._segment, self._offset = first, 0
        return True

    def _read_segment(self) -> list[Record]:
        assert self._fd is not None and self._segment is not None
        size = os.fstat(self._fd).st_size
        if size <= self._offset:
            return []
        data = os.pread(self._fd, size - self._offset, self._offset)
        out: list[Record] = []
        pos = 0
        after_damage = False
        while True:
            end = data.find(b"\n", pos)
            if end < 0:
                break  # an incomplete last line: not written yet, or torn by a crash
            record = _parse(data[pos:end])
            if record is None:
                self._report_damage(self._offset + pos)
                after_damage = True
            elif record.seq > self.last_seq:
                if record.seq != self.last_seq + 1 and not after_damage:
                    raise WalGap(f"record {self.last_seq + 1} is missing from the log")
                out.append(record)
                self.last_seq = record.seq
                after_damage = False
            pos = end + 1
        self._offset += pos
        return out

    def _report_damage(self, offset: int) -> None:
        assert self._segment is not None
        key = (self._segment, offset)
        if key in self._damaged_reported:
            return
        self._damaged_reported.add(key)
        path = self.path(self._segment)
        kept = path.with_name(f"{path.name}.corrupt-{utcnow():%Y%m%dT%H%M%S}")
        try:
            if not kept.exists():
                with open(path, "rb") as src, open(kept, "wb") as dst:
                    dst.write(src.read())
        except OSError:
            kept = path
        logger.error(
            "write-ahead log %s has a damaged record at byte %d; it was skipped and the file "
            "is kept as %s",
            path,
            offset,
            kept,
        )

    # ---- writing (callers hold the write lock and have read to the end) ----------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold `write.lock` (across processes) for as long as the block runs."""
        if self._flock is None:
            raise StoreError("this write-ahead log was opened for reading only")
        data_dir = Path(self._flock.lock_file).parent
        assert self._in_process is not None
        # this process's threads first queue on a thread lock, which wakes a waiter the
        # moment it is released: on the file lock alone a thread polled every 50 ms, so a
        # save behind the checkpoint's seal waited up to 50 ms more, and the checkpoint's
        # seal behind back-to-back saves waited for seconds (issue 44, save_tail_bench.py)
        if not self._in_process.acquire(timeout=self._timeout if self._timeout >= 0 else -1):
            raise StoreBusy("the memory store is busy in this process; try again in a moment.")
        try:
            try:
                self._flock.acquire(poll_interval=_POLL)
            except Timeout as exc:
                raise StoreBusy(
                    "the memory store is locked by another process; try again in a moment."
                ) from exc
            except OSError as exc:
                raise StoreError(
                    f"cannot lock the data directory {data_dir} ({exc.strerror}); it may be "
                    "read-only. Reads still work; give a writable --data-dir to save."
                ) from exc
            try:
                yield
            finally:
                self._flock.release()
        finally:
            self._in_process.release()

    def append(self, batches: Sequence[Sequence[Op]]) -> int:
        """Append one record per batch with one write() and one fsync; returns the last seq.
        On failure the log is cut back to where it was, so nothing half-written remains."""
        with self._lock:
            return self._append(batches)

    def _append(self, batches: Sequence[Sequence[Op]]) -> int:
        if self._fd is None or not self._writable_segment():
            self.rotate()
        assert self._segment is not None
        data = b"".join(_frame(self.last_seq + 1 + i, ops) for i, ops in enumerate(batches))
        fd = os.open(self.path(self._segment), os.O_WRONLY)
        try:
            os.ftruncate(fd, self._offset)  # drop a torn tail left by a crashed writer
            written = os.pwrite(fd, data, self._offset)
            if written != len(data):
                raise OSError(28, "short write (no space left on device?)")
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._offset)
            raise
        finally:
            os.close(fd)
        return self.last_seq + len(batches)

    def _writable_segment(self) -> bool:
        segments = self.segments()
        return bool(segments) and segments[-1] == self._segment

    def rotate(self) -> int:
        """Start a new segment at the next seq (caller holds the write lock and has read to the
        end). Returns its first seq."""
        with self._lock:
            return self._rotate()

    def _rotate(self) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        first = self.last_seq + 1
        path = self.path(first)
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.fsync(fd)
            os.close(fd)
            _fsync_dir(self.folder)
        self.close()
        self.last_seq = first - 1
        self._fd = os.open(path, os.O_RDONLY)
        self._segment, self._offset = first, 0
        return first

    def sealed_records(self, after: int, through: int) -> Iterator[Record]:
        """Records with after < seq <= through, read from the files (for a checkpoint). A
        segment whose records are all <= `after` is not read: the log keeps every segment the
        snapshot does not cover (a quarter of the memories), and at 100,000 memories each
        checkpoint parsed thousands of folded records again to fold 512 (160-200 ms of its
        ~250, under the interpreter lock beside the saves; issue 57)."""
        segments = self.segments()
        folded = set(_all_at_or_before(segments, after))
        for first in segments:
            if first > through:
                break
            if first in folded:
                continue
            try:
                data = self.path(first).read_bytes()
            except FileNotFoundError:
                continue
            for line in data.split(b"\n"):
                record = _parse(line) if line else None
                if record is not None and after < record.seq <= through:
                    yield record

    def drop_sealed(self, through: int) -> None:
        """Delete segments whose records are all <= `through`, keeping the newest of them for
        readers that are a little behind."""
        for first in _all_at_or_before(self.segments(), through)[:-1]:
            with contextlib.suppress(FileNotFoundError):
                self.path(first).unlink()


def _all_at_or_before(segments: Sequence[int], seq: int) -> list[int]:
    """The segments (by first seq, in order) whose records all have seqs <= `seq`: those the
    next segment starts after. The last is never among them (it may still grow)."""
    return [first for first, next_first in pairwise(segments) if next_first - 1 <= seq]


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""Append-only JSONL logs in the data directory, read by the dream worker.

- `conversation.jsonl`, appended by the host agent (or `dreamwell log conversation`):
  `{"ts", "session", "role": "user" | "assistant", "content"}`
- `feedback.jsonl`, appended by the host agent (or `dreamwell log feedback`):
  `{"ts", "session", "kind": "Correction" | "helpful" | "harmful" | ..., "memory_id"?, "detail"}`
- `recall.jsonl`, appended by the server on every search_memory:
  `{"ts", "caller", "query", "ids": [...]}`

Appends and takes hold the log's lock, so a line appended while the dream worker takes the log
lands in the next take instead of being lost. Every text of a record is redacted as it is
appended (stores/redact.py), whoever appends it: a hook, `dreamwell log`, the server. On a
data directory that caches an object store (`DataDir.remote`) the log is kept there instead,
one object per record
(`stores/inputs/object_log.py`), with the same operations and bound.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from dreamwell.stores.errors import InvalidInput, StoreBusy, WriteFailed
from dreamwell.stores.files import aside_name, keep_aside, write_atomic
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import utcnow
from dreamwell.stores.redact import redact_record
from dreamwell.stores.writable import advice

if TYPE_CHECKING:
    from dreamwell.stores.inputs.object_log import BlobLog

logger = logging.getLogger(__name__)

CONVERSATION = "conversation.jsonl"
FEEDBACK = "feedback.jsonl"
RECALL = "recall.jsonl"
MAX_LINE = 64 * 1024


CONVERSATION_MAX_BYTES = 4 * 1024 * 1024  # the recorded conversation keeps its newest ~4 MiB
RECALL_MAX_BYTES = 4 * 1024 * 1024  # what callers were shown, kept until the judge read it
FEEDBACK_MAX_BYTES = 1024 * 1024  # Corrections wait for the anti-pattern pass
SKILL_USAGE = "skill-usage.jsonl"  # {"ts", "session", "skill" | "tool", "via"}
SKILL_USAGE_MAX_BYTES = 1024 * 1024
ENRICH_QUEUE = "enrich-queue.jsonl"  # saved memories waiting to be enriched by the LLM
ENRICH_QUEUE_MAX_BYTES = 256 * 1024  # ~4,000 waiting ids; past it the oldest half is dropped
# Every input log is bounded, whoever appends to it: a record stays until a pass that reads
# it ran (docs/dreaming.md), so without an LLM only the bound keeps a log from growing for ever.
BOUNDS = {
    CONVERSATION: CONVERSATION_MAX_BYTES,
    RECALL: RECALL_MAX_BYTES,
    FEEDBACK: FEEDBACK_MAX_BYTES,
    SKILL_USAGE: SKILL_USAGE_MAX_BYTES,
    ENRICH_QUEUE: ENRICH_QUEUE_MAX_BYTES,
}


def _key(record: Mapping[str, Any]) -> str:
    """A record's identity for `consume`: its canonical JSON."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


class JsonlLog:
    def __init__(
        self,
        data_dir: Path,
        name: str,
        lock_timeout: float = 15.0,
        max_bytes: int | None = None,
    ) -> None:
        """`max_bytes` bounds the log (by default the log's own bound, `BOUNDS`): past it,
        the oldest half of the lines is dropped, and counted (`dropped`)."""
        self.path = data_dir / name
        self.max_bytes = max_bytes if max_bytes is not None else BOUNDS.get(name)
        self._dropped = DataDir(data_dir).log_dropped(name)
        self._lock = FileLock(str(data_dir / f".{name}.lock"), timeout=lock_timeout)
        self._remote: BlobLog | None = None
        remote = DataDir(data_dir).remote
        if remote is not None:
            from dreamwell.stores.inputs.object_log import BlobLog
            from dreamwell.stores.remote.blobs import Blobs

            self._remote = BlobLog(Blobs(remote, f"logs/{name}"), self.max_bytes)

    @property
    def blocking(self) -> bool:
        """Whether an append waits on the network (the log is on an object store)."""
        return self._remote is not None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._lock.acquire()
        except Timeout as exc:
            raise StoreBusy(
                f"the log {self.path.name} is locked by another process; try again."
            ) from exc
        except OSError as exc:
            raise WriteFailed(
                f"the log {self.path} cannot be locked ({advice(self.path, exc)})."
            ) from exc
        try:
            yield
        finally:
            self._lock.release()

    def append(self, record: Mapping[str, Any], now: datetime | None = None) -> None:
        """Add one record; raises InvalidInput, StoreBusy or WriteFailed, never anything else."""
        try:
            stamped = {"ts": (now or utcnow()).isoformat(), **redact_record(record)}
            line = json.dumps(stamped, ensure_ascii=False)
            data = (line + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:  # not JSON, or a lone surrogate
            raise InvalidInput(f"a log record must be JSON text in valid Unicode ({exc}).") from exc
        if len(line) > MAX_LINE:
            raise InvalidInput(f"a log line is limited to {MAX_LINE} characters; shorten it.")
        if self._remote is not None:
            return self._remote.append(data)
        with self._locked():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data)
                    size = os.fstat(fd).st_size
                finally:
                    os.close(fd)
                if self.max_bytes is not None and size > self.max_bytes:
                    self._trim()
            except OSError as exc:
                raise WriteFailed(
                    f"the log {self.path} could not be written ({advice(self.path, exc)})."
                ) from exc

    def drop(self, keep: Callable[[dict[str, Any]], bool]) -> None:
        """Remove the records `keep` refuses, atomically with respect to appends (a damaged
        line is kept as it is)."""
        if self._remote is not None:
            return self._remote.drop(keep)
        with self._locked():
            try:
                lines = self.path.read_bytes().splitlines(keepends=True)
            except FileNotFoundError:
                return
            kept = []
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    kept.append(line)
                    continue
                if not isinstance(record, dict) or keep(record):
                    kept.append(line)
            try:
                write_atomic(self.path, b"".join(kept).decode("utf-8", "replace"))
            except OSError as exc:
                raise WriteFailed(f"the log {self.path} could not be rewritten ({exc})") from exc

    def consume(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Remove exactly `records`, as `read` returned them earlier, and nothing appended
        since: the second half of a two-phase take, called once what the records fed has
        been written (a process killed before that leaves the log as it was). Damaged lines
        are moved to `<name>.corrupt-<time>` rather than deleted."""
        if self._remote is not None:
            return self._remote.consume(records, _key)
        pending = Counter(_key(r) for r in records)
        with self._locked():
            try:
                lines = self.path.read_bytes().splitlines(keepends=True)
            except FileNotFoundError:
                return
            kept: list[bytes] = []
            damaged: list[bytes] = []
            for line in lines:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line.decode("utf-8"))
                except ValueError:
                    record = None
                if not isinstance(record, dict):
                    damaged.append(line)
                elif pending[_key(record)] > 0:
                    pending[_key(record)] -= 1
                else:
                    kept.append(line)
            try:
                if damaged:
                    aside = aside_name(self.path)
                    aside.write_bytes(b"".join(damaged))
                    logger.error("%s: moved %d damaged lines to %s", self.path, len(damaged), aside)
                write_atomic(self.path, b"".join(kept).decode("utf-8"))
            except OSError as exc:
                raise WriteFailed(
                    f"the log {self.path} could not be rewritten ({exc.strerror or exc}); check "
                    "the data directory's free space and permissions."
                ) from exc

    def _trim(self) -> None:
        """Keep the newest half of the lines and count the others (caller holds the lock)."""
        lines = self.path.read_bytes().splitlines(keepends=True)
        kept = lines[len(lines) // 2 :]
        write_atomic(self.path, b"".join(kept).decode("utf-8", "replace"))
        write_atomic(self._dropped, str(self.dropped() + len(lines) - len(kept)))

    def dropped(self) -> int:
        """How many records the size bound dropped from this log, all told."""
        if self._remote is not None:
            return self._remote.dropped()
        try:
            return int(self._dropped.read_text(encoding="utf-8").strip() or 0)
        except (OSError, ValueError):
            return 0

    def _scan(self) -> tuple[list[dict[str, Any]], int]:
        """(well-formed records, number of lines that are not)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0
        out: list[dict[str, Any]] = []
        bad = 0
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
            except ValueError:  # not UTF-8, not JSON, a torn last line
                record = None
            if isinstance(record, dict):
                out.append(record)
            else:
                bad += 1
        return out, bad

    def read(self) -> list[dict[str, Any]]:
        """Every well-formed record; damaged lines are counted in the log, never fatal."""
        if self._remote is not None:
            return self._remote.read()
        records, bad = self._scan()
        if bad:
            logger.warning("%s: skipped %d damaged lines", self.path, bad)
        return records

    def take(self) -> list[dict[str, Any]]:
        """Read every record and empty the log, atomically with respect to appends. A log with
        damaged lines is kept aside (`<name>.corrupt-<time>`) rather than deleted."""
        if self._remote is not None:
            return self._remote.take()
        with self._locked():
            records, bad = self._scan()
            try:
                if bad:
                    keep_aside(self.path, f"{bad} lines are not JSON records")
                else:
                    self.path.unlink(missing_ok=True)
            except OSError as exc:
                raise WriteFailed(
                    f"the log {self.path} could not be emptied ({exc.strerror or exc}); check "
                    "the data directory's permissions."
                ) from exc
        return records

"""A copy of every long-term record that does not depend on LanceDB: the snapshot and the log.

At a checkpoint, once the log since the last snapshot holds more than `SNAPSHOT_EVERY`
records or a quarter of the memories, the records as LanceDB now holds them are written to
`longterm.snapshot.gz` (gzip JSON lines: a header `{"seq": S, "count": N}`, then one entry
per line; written to a temporary file, fsynced and renamed). The log keeps every segment the
snapshot does not cover, so the snapshot plus the log since it hold every memory, whatever
happens to LanceDB's files: `stores/longterm/repair.py` restores from them. Vectors are not kept
(they are re-embedded), which keeps it near 200 bytes a memory.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dreamwell.stores.files import keep_aside
from dreamwell.stores.model import MemoryEntry, entry_from_dict, entry_to_dict

logger = logging.getLogger(__name__)

SNAPSHOT_EVERY = 1024  # records since the last snapshot, at least, before another is written
_LEVEL = 6
# entries encoded between two yields of the interpreter lock: encoding is pure Python on the
# checkpoint thread, and a save beside it, back from each system call, waited up to the 5 ms
# switch interval for the lock every time: 86-160 ms in all (tests/bench/save_tail_bench.py)
YIELD_EVERY = 8
# entries joined, encoded and compressed at a time: the whole snapshot at once (40 MB of text at
# 100,000 memories) held the interpreter lock through its join and its encoding, 23-30 ms each,
# and every save beside the checkpoint waited that long (issue 57)
ROWS_A_WRITE = 2_000


@dataclass(frozen=True)
class Snapshot:
    seq: int  # the log records it covers: seq <= this
    entries: dict[str, MemoryEntry]


def header_seq(path: Path) -> int | None:
    """The seq the snapshot covers (its first line only), None without a readable one."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return int(json.loads(fh.readline())["seq"])
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None


def due(path: Path, end: int, live: int) -> bool:
    seq = header_seq(path)
    return seq is None or end - seq >= max(SNAPSHOT_EVERY, live // 4)


def write(path: Path, seq: int, entries: Iterable[MemoryEntry]) -> None:
    rows = []
    for k, entry in enumerate(entries, 1):
        rows.append(json.dumps(entry_to_dict(entry), separators=(",", ":")))
        if k % YIELD_EVERY == 0:
            time.sleep(0)  # see YIELD_EVERY
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=_LEVEL, mtime=0) as fh:
                fh.write(json.dumps({"seq": seq, "count": len(rows)}).encode() + b"\n")
                for at in range(0, len(rows), ROWS_A_WRITE):
                    if at:
                        fh.write(b"\n")
                    part = "\n".join(rows[at : at + ROWS_A_WRITE])
                    fh.write(part.encode("utf-8", "surrogatepass"))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read(path: Path) -> Snapshot | None:
    """The snapshot; None when there is none. A damaged one is kept aside (and None)."""
    if not path.exists():
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="surrogatepass") as fh:
            head = json.loads(fh.readline())
            entries = [entry_from_dict(json.loads(line)) for line in fh if line.strip()]
        if len(entries) != int(head["count"]):
            raise ValueError(f"{len(entries)} records, {head['count']} written")
        return Snapshot(int(head["seq"]), {e.id: e for e in entries})
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        try:
            keep_aside(path, str(exc))
        except OSError:
            logger.error("the snapshot %s is damaged (%s)", path, exc)
        return None

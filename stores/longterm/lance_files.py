"""Checking LanceDB's data files before LanceDB reads them.

A Lance data file keeps its layout in a footer, and LanceDB trusts it: a file whose footer
was overwritten failed every read of the table (or worse), and one overwritten in the middle
was read as if whole, its vectors silently dropped. Data files are never changed once
written, so each file's size and CRC-32 is recorded (`lancedb.sums.json`) under the
checkpoint lock after every write, and checked when a store opens: a file that no longer
matches, or that is not recorded and does not end with Lance's magic bytes, is moved to
`damaged/` before LanceDB opens the table. LanceDB then finds it missing, which the repair
path handles: the fragment is dropped from the table and its memories are restored from the
snapshot and the log (`stores/longterm/repair.py`).
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from pathlib import Path

from filelock import FileLock, Timeout

from dreamwell.stores.files import write_atomic

logger = logging.getLogger(__name__)

MAGIC = b"LANC"  # the last bytes of every complete Lance data file
_CHUNK = 1 << 20

Sums = dict[str, list[int]]  # "data/<name>" or "_versions/<name>" -> [size, crc32]
Kept = list[tuple[Path, str]]  # files set aside, and why


def data_files(lancedb: Path) -> list[Path]:
    """The data files and manifests (both end with Lance's magic, neither ever changes)."""
    table = lancedb / "memories.lance"
    try:
        return sorted(table.glob("data/*.lance")) + sorted(table.glob("_versions/*.manifest"))
    except OSError:
        return []


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def crc(path: Path) -> int:
    value = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            value = zlib.crc32(chunk, value)
    return value


def _ends_with_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(-len(MAGIC), os.SEEK_END)
            return fh.read() == MAGIC
    except OSError:
        return False


def read_sums(path: Path) -> Sums:
    """The recorded sums; an unreadable file counts as none recorded (files are then checked
    by their magic bytes only, and recorded again)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): [int(v[0]), int(v[1])] for k, v in raw.items()}
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return {}


def why_damaged(path: Path, recorded: list[int] | None) -> str | None:
    """Why `path` cannot be trusted, or None when it can."""
    if path.is_dir() or not path.is_file():
        return "not a file"
    size = path.stat().st_size
    if recorded is None:
        return None if size > len(MAGIC) and _ends_with_magic(path) else "incomplete"
    if size != recorded[0]:
        return f"{size} bytes, {recorded[0]} written"
    return None if crc(path) == recorded[1] else "its checksum does not match"


def set_aside(lancedb: Path, sums_file: Path, keep: Path) -> Kept:
    """Move the data files that cannot be trusted into `keep`; returns (kept file, why).
    Caller holds the checkpoint lock."""
    sums = read_sums(sums_file)
    kept: Kept = []
    for file in data_files(lancedb):
        why = why_damaged(file, sums.get(_key(file)))
        if why is None:
            continue
        keep.mkdir(parents=True, exist_ok=True)
        target = keep / file.name
        if file.is_dir():  # a directory where a file was: nothing to keep but its name
            file.rename(target)
        else:
            os.replace(file, target)
        logger.error("LanceDB data file %s is damaged (%s); kept it as %s", file, why, target)
        kept.append((target, why))
    return kept


def check(lancedb: Path, sums_file: Path, keep: Path, lock: FileLock, timeout: float) -> Kept:
    """`set_aside` under the checkpoint lock, before LanceDB opens the table, and record
    what is new; returns what was set aside. Skipped when the lock cannot be had."""
    try:
        lock.acquire(timeout=timeout)
    except (Timeout, OSError) as exc:
        logger.warning("cannot check LanceDB's files now (%s)", exc)
        return []
    try:
        kept = set_aside(lancedb, sums_file, keep)
        record(lancedb, sums_file)
        return kept
    except OSError as exc:  # a read-only directory: reads still skip what fails
        logger.error("cannot set damaged LanceDB files aside: %s", exc)
        return []
    finally:
        lock.release()


def record(lancedb: Path, sums_file: Path) -> None:
    """Record the sums of data files written since the last call and forget removed ones
    (caller holds the checkpoint lock). A read-only directory records nothing."""
    sums = read_sums(sums_file)
    files = {_key(f): f for f in data_files(lancedb) if f.is_file()}
    fresh = {name: sums[name] for name in files if name in sums}
    for name, file in files.items():
        if name not in fresh:
            fresh[name] = [file.stat().st_size, crc(file)]
    if fresh != sums:
        try:
            write_atomic(sums_file, json.dumps(fresh, separators=(",", ":")))
        except OSError as exc:
            logger.warning("cannot record LanceDB's data file checksums: %s", exc)

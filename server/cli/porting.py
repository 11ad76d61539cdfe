"""`dreamwell export` and `dreamwell import`: JSON Lines of every field out, and in, through
`LongTermStore.apply` in batches, from any format `formats` reads. Vectors are left for the
server's background backfill."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dreamwell.server.cli.formats import FOREIGN, MAX_TAGS, read_all
from dreamwell.server.cli.stats import ensure_format, no_store
from dreamwell.stores import (
    PROJECT,
    DataDir,
    LongTermStore,
    MemoryEntry,
    OnnxE5,
    OnnxMiniLM,
    ProgressReport,
    StoreBusy,
    StoreError,
    VectorLike,
    Write,
    entry_to_dict,
    fold_text,
    report_progress,
    utcnow,
)

BATCH = 5_000
MAX_ATTEMPTS = 5  # a batch another process keeps changing is planned again this often
SHOWN_BAD = 20
MAX_IMPORT_BYTES = 1024**3  # what one import reads; a bigger file is split (at any line)
IMPORTED_AS = "imported_as"  # metadata: ids of imported records reinforced into this entry

if TYPE_CHECKING:
    from dreamwell.server.config import Settings


# ---- planning and writing ------------------------------------------------------------------
@dataclass
class Plan:
    upserts: dict[str, MemoryEntry] = field(default_factory=dict)
    added: int = 0
    reinforced: int = 0
    updated: int = 0
    unchanged: int = 0


def _dup_key(e: MemoryEntry) -> tuple[str, str, str]:
    """One memory per category, folded text and project (docs/projects.md: not across projects)."""
    return (e.category or "", fold_text(e.content) or e.content, e.metadata.get(PROJECT, ""))


# the times an import may fill in for a record that lacks them
_TIMES = ("created_at", "updated_at", "last_seen_at", "last_used_at", "decayed_at")


def _newer(r: MemoryEntry, current: MemoryEntry) -> bool:
    """Whether a record of ours is a newer version of `current`: later, and saying something
    else than it does (a record whose missing times were filled in with the import's own is
    not: importing it again finds it already there)."""
    times = {k: getattr(current, k) for k in _TIMES}
    return r.updated_at > current.updated_at and replace(r, **times) != current


class Planner:
    """What importing records into a store holding `existing` changes (docs/reference.md#tools): a
    known id is left alone (or, for dreamwell's own records, replaced by a newer version of itself;
    foreign records carry no version); the same text live in the same category reinforces;
    anything else is added. Remembers what it planned, batch after batch."""

    def __init__(self, existing: Iterable[MemoryEntry]) -> None:
        self.by_id = {e.id: e for e in existing}
        self.seen = set(self.by_id)
        for e in self.by_id.values():
            self.seen.update(i for i in e.metadata.get(IMPORTED_AS, "").split(",") if i)
        self.dups = {_dup_key(e): e.id for e in self.by_id.values() if e.live}

    def plan(self, records: Iterable[MemoryEntry], now: datetime) -> Plan:
        plan = Plan()
        for r in records:
            self._one(plan, r, now)
        self.by_id.update(plan.upserts)
        return plan

    def _one(self, plan: Plan, r: MemoryEntry, now: datetime) -> None:
        current = plan.upserts.get(r.id) or self.by_id.get(r.id)
        if r.id in self.seen:
            own = r.metadata.get("source") not in FOREIGN
            if own and current is not None and _newer(r, current):
                plan.upserts[r.id] = r
                plan.updated += 1
            else:
                plan.unchanged += 1
            return
        self.seen.add(r.id)
        target_id = self.dups.get(_dup_key(r)) if r.live else None
        if target_id is None:
            plan.upserts[r.id] = r
            plan.added += 1
            if r.live:
                self.dups[_dup_key(r)] = r.id
            return
        target = plan.upserts.get(target_id) or self.by_id[target_id]
        ids = [i for i in target.metadata.get(IMPORTED_AS, "").split(",") if i]
        plan.upserts[target_id] = replace(
            target,
            tags=tuple(dict.fromkeys(target.tags + r.tags))[:MAX_TAGS],
            last_seen_at=max(target.last_seen_at, r.last_seen_at),
            updated_at=now,
            reinforcement_count=target.reinforcement_count + 1,
            metadata={**target.metadata, IMPORTED_AS: ",".join([*ids, r.id])},
        )
        plan.reinforced += 1


def progress(total: int, what: str, unit: str = " memories") -> Any:
    """A tqdm bar on a terminal; plain lines (one per batch) otherwise."""
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=unit, disable=not sys.stderr.isatty())


class NotJsonLines(ValueError):
    """Most of the input is not JSON: a text file given by mistake (one line, not 20)."""


class ImportInterrupted(Exception):
    """Ctrl-C during an import: the batches before it are written whole, the rest not."""

    def __init__(self, written: int, total: int) -> None:
        super().__init__(
            f"interrupted: {written:,} of {total:,} records written; run the same import "
            "again to finish the rest (the records already written are recognised, not "
            "doubled)"
        )


@contextlib.contextmanager
def interrupt_between_batches() -> Iterator[Callable[[], bool]]:
    """Ctrl-C (SIGINT) noted instead of raised while batches are written, so a batch is
    written whole or not at all; the function given says whether it came. Elsewhere than on
    the main thread (a test calling in) signals are not ours to take: never interrupted."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    came: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield lambda: bool(came)
    finally:
        signal.signal(signal.SIGINT, previous)


def write_batches(
    store: LongTermStore,
    records: Sequence[MemoryEntry],
    now: datetime,
    batch: int = BATCH,
    report: ProgressReport = lambda done, total: None,
) -> Plan:
    """Plan and write batch by batch. Each batch is one compare-and-set group (one log
    record, one fsync, then one checkpoint into LanceDB and Tantivy): if another process
    changed an entry the plan touches, nothing of the batch is written and it is planned
    again on a fresh snapshot, so a server's concurrent write is never overwritten. Ctrl-C
    stops the import after the batch being written (ImportInterrupted). `report(done, total)`
    after each batch tells the browser (stores/progress.py)."""
    total = Plan()
    with progress(len(records), "importing") as bar, interrupt_between_batches() as stop:
        for start in range(0, len(records), batch):
            if stop():
                raise ImportInterrupted(start, len(records))
            chunk = records[start : start + batch]
            for _attempt in range(MAX_ATTEMPTS):
                current = store.entries(include_archived=True)
                known = {e.id: e for e in current}
                plan = Planner(current).plan(chunk, now)
                group = [Write(i, known.get(i), e) for i, e in plan.upserts.items()]
                if not group or store.write([group]) == [True]:
                    break
            else:
                raise StoreBusy(
                    "other processes kept changing the memories this import touches; "
                    "nothing more was imported. Run the import again."
                )
            store.checkpoint()
            for name in ("added", "reinforced", "updated", "unchanged"):
                setattr(total, name, getattr(total, name) + getattr(plan, name))
            bar.update(len(chunk))
            report(start + len(chunk), len(records))
            if bar.disable:
                sys.stderr.write(f"imported {start + len(chunk)}/{len(records)}\n")
    return total


class Unreadable(ValueError):
    """The file to import cannot be read as text (one line says why)."""


def read_input(name: str) -> str:
    """The text of the file to import (`-`: stdin). Refused in one line: anything but a
    regular file or stdin (a FIFO is never waited on, a device never read), more than
    MAX_IMPORT_BYTES, or bytes that are not UTF-8."""
    limit = (
        f"more than {MAX_IMPORT_BYTES // 1024**2:,} MiB; split it (JSON Lines split at any line)"
    )
    if name == "-":
        data = sys.stdin.buffer.read(MAX_IMPORT_BYTES + 1)
    else:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise Unreadable(str(exc)) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise Unreadable("not a regular file (a FIFO, a device or a directory)")
            if info.st_size > MAX_IMPORT_BYTES:
                raise Unreadable(limit)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as file:
            data = file.read(MAX_IMPORT_BYTES + 1)
    if len(data) > MAX_IMPORT_BYTES:
        raise Unreadable(limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(str(exc)) from None


def import_file(
    data_dir: Path, text: str, skip_bad: bool, notes: list[str] | None = None
) -> tuple[Plan, list[str]]:
    """Read and validate everything, then write in batches. With bad records and no
    `skip_bad`, nothing is written. `notes` gets one line per record kept incomplete."""
    now = utcnow()
    records, bad, incomplete = read_all(text, now)
    if notes is not None:
        notes.extend(incomplete)
    not_json = [b for b in bad if ": not JSON (" in b]
    if len(not_json) > len(records):  # a text file given by mistake: one line, not 20
        raise NotJsonLines(
            f"{len(not_json)} lines are not JSON ({not_json[0]}) and "
            f"{len(records)} hold a memory; nothing was imported. Import reads one JSON memory "
            "per line, a JSON array of them, or an export of dreamwell, mcp-memory-service or "
            "the knowledge-graph memory server"
        )
    if bad and not skip_bad:
        return Plan(), bad
    ensure_format(data_dir)
    dirs = DataDir(data_dir)
    with report_progress(dirs.import_progress, dirs.import_lock) as report:
        report(0, len(records))  # opening the store can take a while: shown at once
        store = LongTermStore(data_dir, embedder=None)
        return write_batches(store, records, now, report=report), bad


def import_command(data_dir: Path, args: argparse.Namespace) -> int:
    try:
        text = read_input(args.file)
    except (OSError, Unreadable) as exc:
        sys.stderr.write(f"dreamwell: cannot read {args.file}: {exc}\n")
        return 1
    notes: list[str] = []
    try:
        plan, bad = import_file(data_dir, text, args.skip_bad, notes)
    except ImportInterrupted as exc:
        sys.stderr.write(f"dreamwell: {exc}\n")
        return 130
    except NotJsonLines as exc:
        sys.stderr.write(f"dreamwell: {args.file} is not JSON Lines: {exc}\n")
        return 1
    except (StoreError, ValueError) as exc:
        sys.stderr.write(f"dreamwell: {exc}\n")
        return 1
    except RecursionError:
        sys.stderr.write(f"dreamwell: cannot read {args.file}: JSON nested too deeply\n")
        return 1
    _name(args.file, notes, "records kept incomplete")
    for message in bad[:SHOWN_BAD]:
        sys.stderr.write(f"{args.file}: {message}\n")
    if len(bad) > SHOWN_BAD:
        sys.stderr.write(f"{args.file}: … and {len(bad) - SHOWN_BAD} more bad records\n")
    if bad and not args.skip_bad:
        sys.stderr.write(
            f"dreamwell: {len(bad)} bad record(s), nothing imported; fix them or pass "
            "--skip-bad to import the rest\n"
        )
        return 1
    sys.stdout.write(
        f"Imported {plan.added} new, reinforced {plan.reinforced}, updated {plan.updated}, "
        f"{plan.unchanged} already there, {len(bad)} skipped. Vectors are computed by the "
        "server in the background.\n"
    )
    return 0


def _name(file: str, messages: list[str], what: str) -> None:
    for message in messages[:SHOWN_BAD]:
        sys.stderr.write(f"{file}: {message}\n")
    if len(messages) > SHOWN_BAD:
        sys.stderr.write(f"{file}: … and {len(messages) - SHOWN_BAD} more {what}\n")


# ---- export --------------------------------------------------------------------------------
def export_lines(
    entries: Sequence[MemoryEntry],
    vectors: Mapping[str, VectorLike] | None = None,
    model: str = "",
) -> Iterator[str]:
    for e in sorted(entries, key=lambda e: (e.created_at, e.id)):
        data = entry_to_dict(e)
        if vectors is not None and e.id in vectors:
            data["vector"] = [float(x) for x in vectors[e.id]]
            data["vector_model"] = model
        yield json.dumps(data, ensure_ascii=False) + "\n"


def vector_model(settings: Settings) -> str | None:
    """The name the configured embedder's vectors are stored under (None: no embedder)."""
    if settings.embedder == "e5":
        return OnnxE5.name
    if settings.embedder == "minilm":
        return OnnxMiniLM.name
    if settings.embedder == "ollama":
        return f"ollama:{settings.ollama_embed_model}"
    return None


def _write_all(out: IO[str], lines: Iterable[str], total: int) -> int:
    count = 0
    with progress(total, "exporting") as bar:
        for line in lines:
            out.write(line)
            count += 1
            if count % 1000 == 0 or count == total:
                bar.update(count - bar.n)
    return count


def export_command(data_dir: Path, args: argparse.Namespace, model: str | None) -> int:
    """`model`: the name the configured embedder's vectors are stored under (--with-vectors
    exports those, exactly as LanceDB holds them)."""
    missing = no_store(data_dir)
    if missing:
        sys.stderr.write(f"dreamwell: no memory at {missing}; check --data-dir and --tenant\n")
        return 1
    if args.with_vectors and model is None:
        sys.stderr.write("dreamwell: --with-vectors needs an embedder; embedder is none\n")
        return 1
    store = LongTermStore(data_dir)  # no embedder: vectors come from the table, not memory
    vectors = store.vectors(model) if args.with_vectors and model else None
    entries = store.entries(args.include_archived)
    lines = export_lines(entries, vectors, model or "")
    if args.output:
        target = Path(args.output)
        if not target.parent.is_dir():
            sys.stderr.write(f"dreamwell: cannot write {target}: no directory {target.parent}\n")
            return 1
        count = _write_file(target, lines, len(entries))
    else:
        count = _write_all(sys.stdout, lines, len(entries))
    sys.stderr.write(f"exported {count} memories\n")
    _name_lost(data_dir)
    return 0


def _write_file(target: Path, lines: Iterable[str], total: int) -> int:
    """Write `target` as the user meant it (`user_output`): a regular file whole or not at
    all (Ctrl-C or a full disk leaves no half export, and an older one stays intact), a
    symlink's target, a device or FIFO written through, never replaced."""
    from dreamwell.stores import user_output

    with user_output(target) as out:
        return _write_all(out, lines, total)


def _name_lost(data_dir: Path) -> None:
    """Say which memories were lost to damage (no copy held them), from the repair reports."""
    for report in sorted((data_dir / "damaged").glob("longterm-*.json")):
        try:
            lost = json.loads(report.read_text(encoding="utf-8"))["lost"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if lost:
            sys.stderr.write(
                f"{len(lost)} memories were lost to a damaged file and are not exported "
                f"(ids in {report})\n"
            )

"""`dreamwell stats` (what is stored, per tenant) and the data directory's format version
(`format.json`); `dreamwell doctor` is doctor.py, over the same figures."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dreamwell.server.config import Settings
from dreamwell.server.hooks.stats import hook_lines
from dreamwell.stores import FORMAT, PROJECT, PROJECT_NAME, DataDir, JsonlLog, newer_format

if TYPE_CHECKING:
    from dreamwell.stores import LongTermStore, MemoryEntry

FORMAT_FILE = "format.json"
FORMAT_VERSION = FORMAT  # one owner: dreamwell.stores.layout
LOGS = ("conversation.jsonl", "feedback.jsonl", "recall.jsonl")


# ---- format version ------------------------------------------------------------------------
def ensure_format(data_dir: Path) -> None:
    """Write `format.json` when absent (never rewrite it); refuse a newer format clearly."""
    found = read_format(data_dir)
    if found is not None and found > FORMAT_VERSION:
        raise ValueError(format_problem(data_dir, found))
    DataDir(data_dir).ensure(walk=False)  # the walk, if any, when a store opens


def read_format(data_dir: Path) -> int | None:
    return DataDir(data_dir).format()


def format_problem(data_dir: Path, found: int) -> str:
    return newer_format(data_dir, found)


def no_store(data_dir: Path) -> str | None:
    """Where no memory store is, as given (None when there is one): a local data directory
    without its table folder, or an object-store location without its log table. Asked
    before a command that reads opens the store, since opening one creates it (a mistyped
    location would get an empty store). The cache of an object-store location is filled
    from the location when the store opens: a new machine's is empty, so it is not asked."""
    where = DataDir(data_dir).remote
    if where is None:
        return None if (data_dir / "lancedb").exists() else str(data_dir)
    from dreamwell.stores.longterm import has_log, reaching

    with reaching(where, "read"):
        return None if has_log(where.uri, where.storage_options()) else where.uri


# ---- stats ---------------------------------------------------------------------------------
def tenants(root: Path) -> list[tuple[str, Path]]:
    """('', root) and every ('name', root/tenants/name) that exists."""
    found = [("", root)]
    folder = root / "tenants"
    if folder.is_dir():
        found += [(p.name, p) for p in sorted(folder.iterdir()) if p.is_dir()]
    return found


def disk_used(folder: Path, skip: str = "tenants") -> int:
    total = 0
    for path in folder.rglob("*"):
        if skip in path.relative_to(folder).parts[:1]:
            continue
        if path.is_file():
            total += path.stat().st_size
    return total


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


@dataclass
class TenantStats:
    name: str
    data_dir: Path
    live: int = 0
    archived: int = 0
    categories: list[tuple[str, int]] = field(default_factory=list)
    projects: list[tuple[str, int]] = field(default_factory=list)  # (name (key), live)
    missing_vectors: int = 0
    index_docs: int | None = None
    index_in_step: bool = True
    pending: int = 0
    disk: int = 0
    logs: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)  # by each log's size bound
    last_dream: str = "never"


def _last_dream(data_dir: Path) -> str:
    from dreamwell.dream.report import list_reports, load_report

    runs = list_reports(data_dir)
    if not runs:
        return "never"
    report = load_report(data_dir, runs[0])
    kinds = Counter(c.kind for c in report.changes())
    changed = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "nothing changed"
    mode = " (dry run)" if report.dry_run else ""
    undone = f", undone {report.undone[:19]}" if report.undone else ""
    return f"{report.run}{mode}: {changed}{undone}"


def collect(settings: Settings, name: str, data_dir: Path) -> TenantStats:
    from dreamwell.server.runtime import Runtime

    store = Runtime(settings).open_tenant(name).longterm
    every = store.entries(include_archived=True)
    stats = TenantStats(name or "default", data_dir)
    stats.live = sum(1 for e in every if e.live)
    stats.archived = len(every) - stats.live
    stats.categories = Counter(e.category or "uncategorized" for e in every if e.live).most_common()
    stats.projects = Counter(_project(e) for e in every if e.live).most_common()
    store.load_vectors()
    stats.missing_vectors = store.missing_vectors() if store.embedder else stats.live
    stats.index_docs = index_docs(store)
    stats.index_in_step = store.index_in_step()
    stats.pending = store.pending()
    stats.disk = disk_used(data_dir)
    stats.logs = {log: (data_dir / log).stat().st_size for log in LOGS if (data_dir / log).exists()}
    stats.dropped = {log: n for log in LOGS if (n := JsonlLog(data_dir, log).dropped())}
    stats.last_dream = _last_dream(data_dir)
    return stats


def _project(entry: MemoryEntry) -> str:
    """How `stats` names a memory's project (docs/projects.md): `name (key)`, or `(global)`."""
    key = entry.metadata.get(PROJECT)
    if not key:
        return "(global)"
    return f"{entry.metadata.get(PROJECT_NAME) or key.rsplit('/', 1)[-1]} ({key})"


def index_docs(store: LongTermStore) -> int | None:
    """Documents in the text index (None if it cannot be read)."""
    try:
        return store.index_documents()
    except (OSError, ValueError, RuntimeError):
        return None


def embedder_text(settings: Settings) -> str:
    if settings.embedder == "e5":
        return "e5-small-v2-int8 (embedded, 384 dimensions)"
    if settings.embedder == "minilm":
        return "minilm-l6-v2-int8 (embedded, 384 dimensions)"
    if settings.embedder == "ollama":
        return f"ollama:{settings.ollama_embed_model} (dimension known after the first vector)"
    return "none (BM25 only)"


def _log(name: str, size: int, dropped: dict[str, int]) -> str:
    """A log's size, and how many records its size bound dropped unread, if any."""
    lost = f" ({dropped[name]} oldest records dropped by its size bound)" if name in dropped else ""
    return f"{name} {_size(size)}{lost}"


def render_stats(settings: Settings, all_stats: list[TenantStats]) -> str:
    from dreamwell.server.cli.skills import stats_lines as skills_lines

    lines = [f"data directory: {settings.data_dir}", f"embedder: {embedder_text(settings)}"]
    if settings.store_uri:  # the directory above is this machine's cache of the location
        lines.insert(0, f"object store: {settings.store_uri} (shared by every replica)")
    for s in all_stats:
        step = "in step" if s.index_in_step else f"OUT OF STEP ({s.index_docs} documents)"
        lines += [
            "",
            f"tenant {s.name} ({s.data_dir})",
            f"  memories: {s.live} live, {s.archived} archived",
            f"  vectors missing: {s.missing_vectors}",
            f"  text index: {step}",
            f"  disk used: {_size(s.disk)}",
            f"  last dream: {s.last_dream}",
            "  logs: " + (", ".join(_log(k, v, s.dropped) for k, v in s.logs.items()) or "none"),
            *skills_lines(s.data_dir),
            f"  categories ({len(s.categories)}):",
        ]
        lines += [f"    {c}: {n}" for c, n in s.categories[:20]]
        if len(s.categories) > 20:
            lines.append(f"    … {len(s.categories) - 20} more")
        lines.append(f"  projects ({sum(1 for p, _ in s.projects if p != '(global)')}):")
        lines += [f"    {p}: {n}" for p, n in s.projects[:20]]
        if len(s.projects) > 20:
            lines.append(f"    … {len(s.projects) - 20} more")
        lines += hook_lines(DataDir(s.data_dir), stored=s.live)
    return "\n".join(lines) + "\n"


def next_step() -> str:
    """What a new user does first: connect a client, which then saves memories."""
    from dreamwell.server.cli.install import CLIENTS

    return f"connect a client: dreamwell install <client> ({', '.join(CLIENTS)})"


def stats_command(settings: Settings) -> int:
    if not settings.data_dir.exists():  # a fresh install: the first save makes it
        sys.stdout.write(
            f"Nothing stored yet in {settings.data_dir}. Next, {next_step()}; "
            "its agent's first save creates the store.\n"
        )
        return 0
    if not settings.data_dir.is_dir():
        sys.stderr.write(
            f"dreamwell: {settings.data_dir} is a file, not a directory; check --data-dir\n"
        )
        return 1
    missing = no_store(settings.data_dir) if settings.store_uri else None
    if missing:
        sys.stderr.write(f"dreamwell: no memory at {missing}; check --data-dir\n")
        return 1
    found = [collect(settings, n, d) for n, d in tenants(settings.data_dir)]
    sys.stdout.write(render_stats(settings, found))
    return 0

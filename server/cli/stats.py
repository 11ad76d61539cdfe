"""`dreamwell stats` (what is stored) and `dreamwell doctor` (what is wrong and the one command
that fixes it), per tenant, and the data directory's format version (`format.json`)."""

from __future__ import annotations

import errno
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dreamwell.server.cli.checks import Finding, check_clients, check_settings
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


# ---- doctor --------------------------------------------------------------------------------


def check_dir(data_dir: Path) -> list[Finding]:
    if data_dir.exists() and not data_dir.is_dir():
        return [
            Finding(
                False,
                f"{data_dir} is a file, not a directory",
                "point --data-dir (or DREAMWELL_DATA_DIR) at a directory",
            )
        ]
    if not data_dir.is_dir():
        return [fresh(data_dir)]
    probe = data_dir / ".doctor-probe"
    try:
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        return [not_writable(data_dir, exc)]
    found = read_format(data_dir)
    if found is not None and found > FORMAT_VERSION:
        return [Finding(False, format_problem(data_dir, found), "pipx upgrade dreamwell")]
    shown = "not written yet" if found is None else str(found)
    return [Finding(True, f"data directory {data_dir} is writable (format {shown})")]


def fresh(data_dir: Path) -> Finding:
    """No data directory yet: a fresh install (the first save makes it), unless no folder
    above it can be written to."""
    parent = next((p for p in data_dir.parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        return Finding(False, f"cannot make {data_dir}", "point --data-dir at a directory")
    probe = parent / ".doctor-probe"
    try:
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        return not_writable(parent, exc)
    return Finding(
        True, f"nothing stored yet ({data_dir} is made on the first save); next, {next_step()}"
    )


def not_writable(data_dir: Path, exc: OSError) -> Finding:
    """A read-only mount (no `chown` helps: remount it) told from a permissions problem."""
    from dreamwell.stores import mount_point, read_only_mount

    if read_only_mount(data_dir):
        where = mount_point(data_dir)
        return Finding(
            False,
            f"{data_dir} is on a read-only mount ({where}): reads work, saves and dreams "
            "are refused",
            f"mount -o remount,rw {where}  (or give a writable --data-dir)",
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Finding(
            False,
            f"{data_dir} is not writable by this user ({exc.strerror})",
            f"chown -R $USER {data_dir}",
        )
    return Finding(False, f"{data_dir} is not writable ({exc})", f"df -h {data_dir}")


def check_lock(data_dir: Path, wait: float = 2.0) -> Finding:
    from filelock import FileLock, Timeout

    lock = FileLock(str(data_dir / "write.lock"), timeout=wait)
    try:
        with lock:
            return Finding(True, "write lock is free")
    except Timeout:
        return Finding(
            False,
            f"the write lock {data_dir / 'write.lock'} has been held for over {wait:.0f} s",
            f"stop the dreamwell process that hangs (see: fuser -v {data_dir / 'write.lock'})",
        )


def check_location(settings: Settings, data_dir: Path) -> list[Finding]:
    """On an object-store location: nothing when it holds this tenant's store, else why
    not (opening the store to check it would make one at a mistyped location)."""
    from dreamwell.stores import StoreError

    if not settings.store_uri:
        return []
    try:
        missing = no_store(data_dir)
    except StoreError as exc:
        return [Finding(False, str(exc), "check --data-dir and --storage-options")]
    if missing is None:
        return []
    return [
        Finding(
            False,
            f"no memory at {missing}",
            "check --data-dir and --tenant (a location holds a store once `dreamwell "
            "serve` has opened it)",
        )
    ]


def check_store(settings: Settings, name: str, data_dir: Path) -> list[Finding]:
    try:
        s = collect(settings, name, data_dir)
    except Exception as exc:  # doctor reports every failure instead of dying on the first
        return [
            Finding(
                False,
                f"cannot open the memory store: {type(exc).__name__}: {exc}",
                f"dreamwell export --data-dir {settings.data_dir} -o backup.jsonl",
            )
        ]
    found = [Finding(True, f"store opens: {s.live} live, {s.archived} archived")]
    if s.index_in_step:
        found.append(Finding(True, "text index agrees with the table"))
    else:
        found.append(
            Finding(
                False,
                f"text index holds {s.index_docs} documents for {s.live} live memories",
                f"dreamwell dream --once --data-dir {settings.data_dir}",
            )
        )
    for report in sorted(data_dir.glob("damaged/longterm-*.json")):
        found.append(damage_finding(report))
    if s.missing_vectors:
        found.append(
            Finding(
                True,
                f"{s.missing_vectors} vectors still to compute (a running server backfills them)",
            )
        )
    return found


def damage_finding(report: Path) -> Finding:
    """A repair the store made on opening (see `stores/longterm/repair.py`)."""
    try:
        found = json.loads(report.read_text(encoding="utf-8"))
        lost = len(found["lost"])
        restored = len(found.get("restored", found["restored_from_log"]))
        kept = ", ".join(Path(k).name for k in found.get("files_kept", [])) or "none"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Finding(False, f"damage report {report} is unreadable ({exc})", f"cat {report}")
    return Finding(
        False,
        f"long-term memory was found damaged at {found.get('at', '?')}: {restored} memories "
        f"restored from the snapshot and the log, {lost} lost (no copy held them); damaged "
        f"files kept aside: {kept}; vectors of restored memories are re-embedded by a "
        f"running server (ids in {report})",
        "restore lost memories from a backup (dreamwell import), then delete the report"
        if lost
        else f"nothing to do; delete {report} once read",
    )


def check_model(embedder: str) -> Finding:
    from dreamwell.stores.index import E5_DIR, MODEL_DIR, model_files_ok

    if model_files_ok(E5_DIR if embedder == "e5" else MODEL_DIR):
        return Finding(True, "embedded model files match their checksums")
    return Finding(
        False,
        "embedded model files are missing or damaged",
        "pip install --force-reinstall dreamwell",
    )


def check_llm(settings: Settings) -> Finding:
    """The dream's LLM answers; none configured is a warning naming what never runs."""
    from dreamwell.server.dream_llm import CONFIGURE_LLM, llm_configured, llm_for

    if not llm_configured(settings):
        from dreamwell.dream.cycle import LLM_PASSES

        never = ", ".join(LLM_PASSES)
        what = f"no LLM configured: these dream passes never run: {never}, and the judge"
        return Finding(True, what, f"configure one: {CONFIGURE_LLM}", warn=True)
    from dreamwell.dream import LLMError

    llm = llm_for(settings)
    assert llm is not None
    try:
        llm.check()
    except LLMError as exc:
        if settings.llm_provider == "claude-code":
            fix = "npm install -g @anthropic-ai/claude-code, or set claude_path to `claude`"
        elif settings.llm_provider == "ollama":
            model = settings.llm_model or settings.ollama_model
            fix = f"ollama serve  # then: ollama pull {model}"
        else:
            fix = f"start the LLM server, or check llm_base_url and llm_model ({CONFIGURE_LLM})"
        return Finding(False, str(exc), fix)
    return Finding(True, f"LLM {llm.name} answers")


def check_skill_folders(data_dir: Path) -> list[Finding]:
    from dreamwell.server.cli.skills import folder_problems

    return [Finding(False, what, fix) for what, fix in folder_problems(data_dir)]


def check_old_hooks() -> list[Finding]:
    """Claude Code settings that still post hooks to the HTTP door earlier versions opened:
    their token is readable there, and nothing answers them any more."""
    from dreamwell.server.config import client_locations
    from dreamwell.server.hooks.old_hooks import settings_holding_them

    home = client_locations()[0]
    found = []
    for path in settings_holding_them(home, Path.cwd()):
        folder = path.parent.parent
        project = "" if folder == home else f" --project {folder}"
        what = f"{path} still holds dreamwell's old http hooks, with their token"
        fix = f"run `dreamwell install claude-code{project}`: it replaces them with commands"
        found.append(Finding(False, what, fix))
    return found


def doctor_command(settings: Settings, only: str | None = None) -> int:
    findings = check_dir(settings.data_dir)
    if findings[0].ok and settings.data_dir.is_dir():
        known = [name for name, _ in tenants(settings.data_dir)]
        if only is not None and only not in known:
            shown = ", ".join(n for n in known if n) or "none"
            fix = f"pick one of the tenants that exist ({shown}), or leave out --tenant"
            findings.append(Finding(False, f"no tenant '{only}' in {settings.data_dir}", fix))
        for name, data_dir in tenants(settings.data_dir):
            if only is None or name == only:
                label = f"[{name or 'default'}] "
                for f in check_location(settings, data_dir) or [
                    check_lock(data_dir),
                    *check_store(settings, name, data_dir),
                    *check_skill_folders(data_dir),
                ]:
                    findings.append(Finding(f.ok, label + f.what, f.fix))
    if settings.embedder in ("e5", "minilm"):
        findings.append(check_model(settings.embedder))
    findings.append(check_llm(settings))
    findings += check_old_hooks()
    findings += check_settings(settings) + check_clients(settings)
    for f in findings:
        sys.stdout.write(f"{'warn' if f.warn else 'ok  ' if f.ok else 'FAIL'} {f.what}\n")
        if not f.ok or f.warn:
            sys.stdout.write(f"     fix: {f.fix}\n")
    bad = sum(1 for f in findings if not f.ok)
    sys.stdout.write("all good\n" if not bad else f"{bad} problem(s)\n")
    return 1 if bad else 0

"""`dreamwell doctor`: what is wrong with the data directory, each store, the model, the LLM,
the skills' folders, the clients' config and earlier versions' hooks, and the one command that
fixes each (the checks of settings and clients are checks.py's; the figures stats.py's)."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dreamwell.server.cli.checks import Finding, check_clients, check_settings
from dreamwell.server.config import Settings

if TYPE_CHECKING:
    pass

from dreamwell.server.cli.stats import (
    FORMAT_VERSION,
    collect,
    format_problem,
    next_step,
    no_store,
    read_format,
    tenants,
)


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

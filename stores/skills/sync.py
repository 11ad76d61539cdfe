"""Active skills kept as folders a client loads (docs/skills.md#skills-claude-code-can-load): Claude
Code's `Skill` tool loads only folders under `~/.claude/skills/` and `<project>/.claude/skills/`, so
each active skill is written there as `<name>/` (the export format, stores/skills/porting.py).

    enable_sync(dirs, Path("~/.claude/skills"))   turn it on (`dreamwell install claude-code`)
    sync_skills(catalog, project=None) -> [SyncReport]   bring the folders in step
    loadable(dirs, project=None) -> {names}        what the client can load now
    in_step(catalog) -> bool                       the last sync saw this catalog generation
    disable_sync(dirs) -> [removed]                turn it off, removing what it wrote

`skills-sync.json` in the data directory records, per target folder, each skill written there
with the revision and the SHA-256 of each of its files (SKILL.md without dreamwell's keys),
marked `+x` when the file is executable: a `chmod +x` in the folder is an edit like any other.
A sync, under `.skills-sync.lock`, for each active skill of the target:
- no folder: written;
- a folder dreamwell wrote, untouched: rewritten when the skill changed;
- a folder dreamwell wrote that the user edited: the edit becomes a new revision of the skill
  (compare-and-set against the revision written), then the folder is written again;
- a folder dreamwell did not write (or an edit that is not a valid skill): never touched, and
  reported as a clash (`stats`, `doctor`) until it goes away.
A folder of a skill no longer active there (archived, gone, moved to a project) is removed when
it is as dreamwell wrote it; an edited one is left, and forgotten.

A skill whose front matter `metadata` says `dreamwell-project: KEY` belongs to that project:
it goes only to `<that project's root>/.claude/skills/`, and only when the sync is given that
project as `(KEY, root)`; the others go to the user's target."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from dreamwell.stores.errors import InvalidInput, StoreBusy
from dreamwell.stores.files import write_atomic
from dreamwell.stores.layout import DataDir
from dreamwell.stores.skills.catalog import Skill, SkillCatalog, SkillChange
from dreamwell.stores.skills.folders import is_executable, read_folder, write_folder
from dreamwell.stores.skills.porting import exported_files
from dreamwell.stores.skills.record import skill_project

logger = logging.getLogger(__name__)

PROJECT_KEY = "dreamwell-project"
CLAUDE_FOLDER = ".claude/skills"  # of a project, Claude Code's; `.agents/skills` the others'
LOCK_WAIT = 5.0  # seconds a sync waits for another process's sync
Project = tuple[str, Path]  # (the project's key, its root folder)


@dataclass
class SyncReport:
    """What one sync did in one target folder."""

    target: Path
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    revised: list[str] = field(default_factory=list)  # user edits brought back as revisions
    clashes: dict[str, str] = field(default_factory=dict)  # name -> why it was not written


def project_target(root: Path, folder: str = CLAUDE_FOLDER) -> Path:
    return root / folder


def _homes(state: Mapping[str, Any]) -> list[str]:
    """The user's target folders: the first one enabled, then the others (Claude Code's
    `~/.claude/skills`, the other agents' `~/.agents/skills`)."""
    found = [state.get("home"), *(state.get("homes") or [])]
    return list(dict.fromkeys(h for h in found if isinstance(h, str) and h))


def _project_folders(state: Mapping[str, Any]) -> list[str]:
    """The folders, relative to a project's root, its skills go to."""
    found = state.get("project_folders")
    if not isinstance(found, list):  # kept before there were other agents: Claude Code's
        return [CLAUDE_FOLDER]
    return list(dict.fromkeys(f for f in found if isinstance(f, str) and f))


def _digest(files: Mapping[str, bytes], executable: Collection[str]) -> dict[str, str]:
    """path -> SHA-256 of the bytes, `+x` after it when the file is executable."""
    return {
        path: hashlib.sha256(data).hexdigest() + ("+x" if path in executable else "")
        for path, data in sorted(files.items())
    }


# ---- the record of what was written ---------------------------------------------------------
def _load(dirs: DataDir) -> dict[str, Any]:
    try:
        found = json.loads(dirs.skills_sync.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("cannot read %s (%s); starting it again", dirs.skills_sync, exc)
        return {}
    return found if isinstance(found, dict) else {}


def _save(dirs: DataDir, state: dict[str, Any]) -> None:
    write_atomic(dirs.skills_sync, json.dumps(state, indent=1, sort_keys=True))


def _locked(dirs: DataDir) -> FileLock:
    dirs.root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(dirs.skills_sync_lock), timeout=LOCK_WAIT)


def sync_target(dirs: DataDir) -> Path | None:
    """The user's target folder when the sync is on."""
    home = _load(dirs).get("home")
    return Path(home) if isinstance(home, str) and home else None


def sync_clashes(dirs: DataDir) -> dict[str, dict[str, str]]:
    """target folder -> {skill name: why dreamwell did not write it}, as of the last sync."""
    found = _load(dirs).get("clashes")
    return found if isinstance(found, dict) else {}


def loadable(dirs: DataDir, project: Project | None = None) -> set[str]:
    """The skills the client can load: those kept in the user's target and the project's."""
    state = _load(dirs)
    homes = _homes(state)
    if not homes:
        return set()
    folders = state.get("folders") or {}
    mine = [str(project_target(project[1], f)) for f in _project_folders(state)] if project else []
    return {name for t in homes + mine for name in folders.get(t) or {}}


def in_step(catalog: SkillCatalog) -> bool:
    """Whether the last sync saw the catalog as it is now (a cheap check before a sync: edits
    in the folders are only seen by a sync)."""
    return _load(catalog.layout).get("generation") == catalog.generation()


def enable_sync(dirs: DataDir, target: Path, project_folder: str = CLAUDE_FOLDER) -> None:
    """Keep the active skills as folders in `target` from now on (besides those already
    kept), and a project's in its `project_folder`."""
    with _run(_locked(dirs)):
        state = _load(dirs)
        fresh = not _homes(state)
        if fresh:
            state["home"] = str(target)
        elif str(target) not in _homes(state):
            state["homes"] = [*(state.get("homes") or []), str(target)]
        folders = [] if fresh else _project_folders(state)
        if project_folder not in folders:
            folders.append(project_folder)
        state["project_folders"] = folders
        _save(dirs, state)


def disable_sync(
    dirs: DataDir, target: Path | None = None, project_folder: str = CLAUDE_FOLDER
) -> list[str]:
    """Stop keeping folders in `target` (and projects' `project_folder`), or anywhere when
    None; those dreamwell wrote and nobody edited are removed."""
    removed: list[str] = []
    with _run(_locked(dirs)):
        state = _load(dirs)
        folders = state.get("folders") or {}
        homes = [h for h in _homes(state) if target is not None and h != str(target)]
        going = [
            t
            for t in folders
            if target is None or t == str(target) or t.endswith("/" + project_folder)
        ]
        for place in going:
            for name, record in folders.pop(place).items():
                if _untouched(Path(place) / name, record):
                    _remove(Path(place) / name)
                    removed.append(name)
        if not homes:
            dirs.skills_sync.unlink(missing_ok=True)
            return removed
        kept = [f for f in _project_folders(state) if f != project_folder]
        state |= {"home": homes[0], "homes": homes[1:], "folders": folders}
        state["project_folders"] = kept
        _save(dirs, state)
    return removed


class _run:
    """The sync's file lock, as one clear StoreBusy when another sync holds it too long."""

    def __init__(self, lock: FileLock) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        try:
            self.lock.acquire()
        except Timeout as exc:
            raise StoreBusy("another process is syncing the skills' folders; try again") from exc

    def __exit__(self, *_: object) -> None:
        self.lock.release()


# ---- syncing ---------------------------------------------------------------------------------
def sync_skills(catalog: SkillCatalog, project: Project | None = None) -> list[SyncReport]:
    """Bring the user's target folder (and `project`'s) in step with the active skills; no-op
    when the sync is off."""
    dirs = catalog.layout
    if sync_target(dirs) is None:  # off: no lock taken, nothing written
        return []
    with _run(_locked(dirs)):
        state = _load(dirs)
        homes = _homes(state)
        if not homes:
            return []
        before = json.dumps(state, sort_keys=True)
        state["generation"] = catalog.generation()
        active = catalog.list("active")
        users = [s for s in active if skill_project(s) is None]
        wanted = {Path(home): users for home in homes}
        if project is not None:
            mine = [s for s in active if skill_project(s) == project[0]]
            for folder in _project_folders(state):
                wanted[project_target(project[1], folder)] = mine
        reports = [
            _sync_target(catalog, state, target, skills) for target, skills in wanted.items()
        ]
        if json.dumps(state, sort_keys=True) != before:  # nothing to do: nothing written
            _save(dirs, state)
    return reports


def _sync_target(
    catalog: SkillCatalog, state: dict[str, Any], target: Path, skills: list[Skill]
) -> SyncReport:
    report = SyncReport(target)
    written: dict[str, Any] = dict((state.setdefault("folders", {})).get(str(target)) or {})
    for skill in skills:
        record = _sync_one(catalog, target, skill, written.get(skill.name), report)
        if record is None:
            written.pop(skill.name, None)
        else:
            written[skill.name] = record
    names = {s.name for s in skills}
    for name in [n for n in written if n not in names]:
        if _untouched(target / name, written.pop(name)):
            _remove(target / name)
            report.removed.append(name)
    state["folders"][str(target)] = written
    state.setdefault("clashes", {})[str(target)] = report.clashes
    if not report.clashes:
        state["clashes"].pop(str(target))
    if report.written or report.removed or report.revised or report.clashes:
        logger.info("skills folders in %s: %s", target, report)
    return report


def _sync_one(
    catalog: SkillCatalog,
    target: Path,
    skill: Skill,
    record: dict[str, Any] | None,
    report: SyncReport,
) -> dict[str, Any] | None:
    """The record of what is in `target/<name>` after this sync (None: not dreamwell's)."""
    folder = target / skill.name
    mine = _digest(skill.files, skill.executable)
    if not folder.exists():
        return _write(folder, skill, report)
    if record is not None and _raw_digest(folder) == record.get("raw"):
        found: dict[str, str] | None = record.get("files")  # untouched: no parse needed
    else:
        found = _folder_digest(folder)
    if record is None:
        if found == mine:  # the same files (an earlier export): adopted
            return {"revision": skill.revision, "files": mine}
        report.clashes[skill.name] = "a folder dreamwell did not write is in the way"
        return None
    if found is None:
        report.clashes[skill.name] = "the folder was edited and is no longer a valid skill"
        return record
    if found != record.get("files"):
        return _take_edit(catalog, folder, skill, record, report)
    if record.get("revision") != skill.revision or found != mine:
        return _write(folder, skill, report, old=record)
    return record


def _take_edit(
    catalog: SkillCatalog,
    folder: Path,
    skill: Skill,
    record: dict[str, Any],
    report: SyncReport,
) -> dict[str, Any] | None:
    """The user edited a folder dreamwell wrote: that edit is the skill's next revision."""
    edited = read_folder(folder)
    expect = int(record.get("revision") or 0)
    change = SkillChange(skill.name, expect, dict(edited.files), executable=edited.executable)
    result = catalog.apply([change])
    if result.conflicts:
        why = "edited both here and in dreamwell; keeping the folder as it is"
        report.clashes[skill.name] = why
        return record
    report.revised.append(skill.name)
    return _write(folder, result.written[0], report, old=record, say=False)


def _write(
    folder: Path,
    skill: Skill,
    report: SyncReport,
    old: dict[str, Any] | None = None,
    say: bool = True,
) -> dict[str, Any]:
    files = exported_files(skill)
    for stale in set((old or {}).get("files") or {}) - set(files):
        (folder / stale).unlink(missing_ok=True)
    write_folder(folder.parent, skill.name, files, skill.executable)
    if say:
        report.written.append(skill.name)
    return {
        "revision": skill.revision,
        "files": _digest(skill.files, skill.executable),
        "raw": _digest(files, skill.executable),
    }


def _raw_digest(folder: Path) -> dict[str, str] | None:
    """The SHA-256 of each file under `folder` as it is on disk (None: unreadable): the cheap
    check that a folder is as dreamwell wrote it, before any parse."""
    found: dict[str, bytes] = {}
    executable: set[str] = set()
    try:
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                rel = path.relative_to(folder).as_posix()
                found[rel] = path.read_bytes()
                if is_executable(path.stat().st_mode):
                    executable.add(rel)
    except OSError:
        return None
    return _digest(found, executable)


def _folder_digest(folder: Path) -> dict[str, str] | None:
    """The folder's files as a skill holds them (None: not a valid skill any more)."""
    try:
        edited = read_folder(folder)
        return _digest(edited.files, edited.executable)
    except (InvalidInput, OSError):
        return None


def _untouched(folder: Path, record: Any) -> bool:
    """Whether `folder` is there as dreamwell wrote it."""
    if not folder.exists():
        return False
    if not isinstance(record, dict):
        return False
    return _raw_digest(folder) == record.get("raw") or _folder_digest(folder) == record.get("files")


def _remove(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)

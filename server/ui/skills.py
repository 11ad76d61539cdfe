"""What the memory browser's Skills view reads and writes on one tenant's skills (blocking
calls: the ASGI side runs them in a worker thread). No HTTP here, only answers and
`BadRequest`.

Every write is compare-and-set on the skill's `revision` (the one the page was shown): a
skill changed elsewhere meanwhile (the CLI, the dream, another tab) is refused with 409 and
the stored record, never overwritten. Rejecting a candidate archives it (a skill is never
deleted)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dreamwell.dream.report import list_reports, load_report
from dreamwell.server.ui.memories import BadRequest
from dreamwell.stores import Skill, SkillCatalog, SkillChange, SkillUsage
from dreamwell.stores.skills import SKILL_MD, skill_to_json

ACTIONS = ("edit", "approve", "reject", "pin", "unpin", "archive", "restore")
HISTORY_REPORTS = 200  # the newest dream reports searched for a skill's history


def skill_json(skill: Skill, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(skill_to_json(skill))
    files = record.pop("files")
    out = record | {
        "description": skill.description,
        "skill_md": skill.skill_md,
        "files": sorted(files),
    }
    return out | (usage or {})


def listing(catalog: SkillCatalog, data_dir: Path, status: str) -> dict[str, Any]:
    """status: 'all', 'active', 'candidate' or 'archived'. Each skill with its uses in the
    last 30 days and its last use."""
    wanted = None if status in ("", "all") else status
    if wanted is not None and wanted not in ("active", "candidate", "archived"):
        raise BadRequest(400, "status must be one of all, active, candidate, archived")
    stats = SkillUsage(data_dir).stats()
    shown = [
        skill_json(
            s, {"uses_30d": stats.uses_30d.get(s.name, 0), "last_used": stats.last_used.get(s.name)}
        )
        for s in catalog.list(wanted)
    ]
    counts = {k: 0 for k in ("active", "candidate", "archived")}
    for s in catalog.list():
        counts[s.status] = counts.get(s.status, 0) + 1
    return {"skills": shown, "counts": counts}


def _found(catalog: SkillCatalog, name: str) -> Skill:
    skill = catalog.find(name)
    if skill is None:
        raise BadRequest(
            404,
            f"This skill ({name}) no longer exists: it was removed elsewhere.",
            gone=True,
        )
    return skill


def history(data_dir: Path, name: str) -> list[dict[str, Any]]:
    """The dream's changes to skill `name`, newest first (previews left out)."""
    out = []
    for run in list_reports(data_dir)[:HISTORY_REPORTS]:
        try:
            report = load_report(data_dir, run)
        except (OSError, ValueError, KeyError):
            continue  # a damaged report hides only itself
        if report.dry_run:
            continue
        for change in report.changes():
            records = (change.skill_before or {}, change.skill_after or {})
            if change.is_skill and name in (r.get("name") for r in records):
                item = {"run": run, "started": report.started, "undone": report.undone}
                out.append(item | change.to_json())
    return out


def detail(catalog: SkillCatalog, data_dir: Path, name: str) -> dict[str, Any]:
    skill = _found(catalog, name)
    stats = SkillUsage(data_dir).stats()
    usage = {"uses_30d": stats.uses_30d.get(name, 0), "last_used": stats.last_used.get(name)}
    return {"skill": skill_json(skill, usage), "history": history(data_dir, name)}


def _revision(body: dict[str, Any]) -> int:
    shown = body.get("revision")
    if isinstance(shown, bool) or not isinstance(shown, int):
        raise BadRequest(400, "a change must send the revision it was made on ('revision')")
    return shown


def _change(skill: Skill, action: str, body: dict[str, Any], expect: int) -> SkillChange:
    name = skill.name
    if action == "edit":
        text = body.get("skill_md")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(400, "an edit must send the new SKILL.md text ('skill_md')")
        files = {**skill.files, SKILL_MD: text.encode("utf-8")}
        return SkillChange(name, expect, files=files)
    if action in ("approve", "reject") and skill.status != "candidate":
        raise BadRequest(400, f"skill {name!r} is not a candidate; only candidates are {action}d")
    status = {"approve": "active", "reject": "archived", "archive": "archived"}.get(action)
    if action == "restore":
        status = "active"
    if status is not None:
        return SkillChange(name, expect, status=status)
    return SkillChange(name, expect, pinned=action == "pin")


def change(catalog: SkillCatalog, name: str, action: str, body: dict[str, Any]) -> Skill:
    """One action on one skill, compare-and-set against the revision the page was shown."""
    if action not in ACTIONS:
        raise BadRequest(404, f"no action '{action}'; one of: {', '.join(ACTIONS)}")
    expect = _revision(body)
    skill = _found(catalog, name)
    if skill.revision != expect:
        raise _conflict(catalog, name)
    result = catalog.apply([_change(skill, action, body, expect)])
    if result.conflicts:
        raise _conflict(catalog, name)
    return result.written[0]


def _conflict(catalog: SkillCatalog, name: str) -> BadRequest:
    now = _found(catalog, name)
    return BadRequest(
        409,
        "This skill was changed elsewhere since you opened it: reload to see the stored "
        "text, or overwrite it with yours",
        current=skill_json(now),
    )

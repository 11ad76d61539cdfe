"""Import skills from folders, trees or .zip files, and export them as Agent Skills folders
that Claude Code reads unchanged (`~/.claude/skills/<name>/SKILL.md`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dreamwell.stores.errors import InvalidInput
from dreamwell.stores.skills.catalog import (
    ANY_REVISION,
    NEW,
    STATUSES,
    Skill,
    SkillCatalog,
    SkillChange,
    SkillConflict,
)
from dreamwell.stores.skills.folders import read_skills, write_folder
from dreamwell.stores.skills.record import PROJECT_KEY, declared_project
from dreamwell.stores.skills.skill_md import SKILL_MD, add_bookkeeping
from dreamwell.stores.skills.usage import UsageStats


def import_skills(
    catalog: SkillCatalog, path: Path, *, replace: bool = False, status: str = "active"
) -> list[Skill]:
    """Every skill at `path` (validated first: one bad skill refuses them all). A name that
    exists is refused unless `replace`, which writes a new revision of it."""
    if status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}; got {status!r}")
    folders = read_skills(path)
    existing = [f.name for f in folders if catalog.find(f.name) is not None]
    if existing and not replace:
        raise InvalidInput(
            f"skills already exist: {', '.join(existing)}; import with --replace to update them"
        )
    changes = [
        SkillChange(
            f.name,
            ANY_REVISION if f.name in existing else NEW,
            dict(f.files),
            status=status,
            origin=None if f.name in existing else "import",
            project=f.bookkeeping.get(PROJECT_KEY) or declared_project(f.front_matter),
            executable=f.executable,
        )
        for f in folders
    ]
    result = catalog.apply(changes)
    if result.conflicts:  # another process wrote one of them meanwhile
        raise SkillConflict(result.conflicts)
    return list(result.written)


def exported_files(skill: Skill, usage: UsageStats | None = None) -> dict[str, bytes]:
    """The skill's files with dreamwell's bookkeeping keys written into SKILL.md."""
    keys = skill.bookkeeping()
    if usage is not None:
        keys["dreamwell-uses"] = str(usage.uses_30d.get(skill.name, 0))
        if skill.name in usage.last_used:
            keys["dreamwell-last-used"] = usage.last_used[skill.name]
    text = add_bookkeeping(skill.skill_md, keys)
    return {**skill.files, SKILL_MD: text.encode("utf-8")}


def export_skills(
    catalog: SkillCatalog,
    dest: Path,
    *,
    names: Iterable[str] = (),
    status: str | Iterable[str] = "active",
    usage: UsageStats | None = None,
) -> list[Path]:
    """Write skills (by default every active one) as `dest/<name>/…`; returns the folders."""
    wanted = list(names)
    skills = [catalog.get(n) for n in wanted] if wanted else catalog.list(status)
    dest.mkdir(parents=True, exist_ok=True)
    return [write_folder(dest, s.name, exported_files(s, usage), s.executable) for s in skills]

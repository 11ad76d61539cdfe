"""The skills a client hook shows (docs/claude-code.md): the active skills' names and descriptions
at session start, and at each prompt up to MAX_PROMPT_SKILLS relevant ones not yet shown in the
session — only those the client can load, i.e. kept as its skill folders (stores/skills/sync.py),
which the session start brings in step first (`synced`). Read straight from the skill records
(stores/skills/catalog.py: JSON files, no lock) and ranked by BM25 over name + description +
body with the memories' own analyser, in a Tantivy index held in RAM
(stores/index/text_index.py): no numpy, no model, nothing that would slow a hook down."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from dreamwell.stores import DataDir, StoreError
from dreamwell.stores.hooks import hooks_log
from dreamwell.stores.skills import Skill, SkillCatalog, in_step, loadable, sync_skills

Project = tuple[str, Path]  # (a project's key, its root folder)

MAX_PROMPT_SKILLS = 3
MAX_DESCRIPTION = 200  # characters of a description in one hook line


def _about(skill: Skill) -> str:
    text = " ".join(skill.description.split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def synced(catalog: SkillCatalog, project: Project | None = None, always: bool = True) -> set[str]:
    """Bring the client's skill folders in step with the catalog (unless `always` is off and
    the catalog has not changed since the last sync; a failure is one line in hooks.log, never
    raised) and return the names of the skills the client can load: the user's, and those of
    `project` (kept in its `.claude/skills/`)."""
    dirs = catalog.layout
    try:
        if always or not in_step(catalog):
            sync_skills(catalog, project)
    except (StoreError, OSError) as exc:
        hooks_log(dirs, f"skills sync failed: {type(exc).__name__}: {exc}")
    return loadable(dirs, project)


def _served(
    skill: Skill, shown: Collection[str], can_load: Collection[str], project: str | None
) -> bool:
    """Loadable by the client, not shown yet, and not another project's skill (docs/projects.md)."""
    return skill.name in can_load and skill.name not in shown and skill.project in (None, project)


def active(
    catalog: SkillCatalog,
    shown: Collection[str] = (),
    can_load: Collection[str] = (),
    project: str | None = None,
) -> list[tuple[str, str]]:
    """(name, description) of every active skill in `can_load` not in `shown` (nor of another
    project than `project`), pinned ones first."""
    skills = [s for s in catalog.list("active") if _served(s, shown, can_load, project)]
    skills.sort(key=lambda s: (not s.pinned, s.name))
    return [(s.name, _about(s)) for s in skills]


def relevant(
    dirs: DataDir,
    prompt: str,
    shown: Collection[str] = (),
    limit: int = MAX_PROMPT_SKILLS,
    project: Project | None = None,
) -> list[tuple[str, str]]:
    """(name, description) of up to `limit` active skills the client can load matching
    `prompt`, best first, leaving out those in `shown` and another project's (the folders
    brought in step first when the catalog changed since the last sync)."""
    catalog = SkillCatalog(dirs)
    can_load = synced(catalog, project, always=False)
    key = project[0] if project else None
    skills = {s.name: s for s in catalog.list("active") if _served(s, shown, can_load, key)}
    if not skills or not prompt.strip():
        return []
    from dreamwell.stores.index import IndexDoc, TextIndex

    index = TextIndex(None)  # empty, in RAM: the statistics are the skills' own
    docs = {
        name: index.doc_terms(IndexDoc(name, _text(skill), None, ()))
        for name, skill in skills.items()
    }
    scored = sorted(index.score_docs(prompt, docs), key=lambda hit: (-hit[1], hit[0]))
    return [(name, _about(skills[name])) for name, _ in scored[:limit]]


def _text(skill: Skill) -> str:
    """Name and description count twice: they say what the skill is for."""
    head = f"{skill.name.replace('-', ' ')}\n{skill.description}"
    return f"{head}\n{head}\n{skill.body}"

"""The skills a client hook shows (SPEC §8): the active skills' names and descriptions at
session start, and at each prompt up to MAX_PROMPT_SKILLS relevant ones not yet shown in the
session. Read straight from the skill records (stores/skills/catalog.py: JSON files, no lock) and
ranked by BM25 over name + description + body with the memories' own analyser, in a Tantivy
index held in RAM (stores/index/text_index.py): no numpy, no model, nothing that would slow a hook
down."""

from __future__ import annotations

from collections.abc import Collection

from dreamwell.stores import DataDir
from dreamwell.stores.skills import Skill, SkillCatalog

MAX_PROMPT_SKILLS = 3
MAX_DESCRIPTION = 200  # characters of a description in one hook line


def _about(skill: Skill) -> str:
    text = " ".join(skill.description.split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def _served(skill: Skill, shown: Collection[str], project: str | None) -> bool:
    """Not shown yet, and not another project's skill (SPEC §11)."""
    return skill.name not in shown and (project is None or skill.project in (None, project))


def active(
    dirs: DataDir, shown: Collection[str] = (), project: str | None = None
) -> list[tuple[str, str]]:
    """(name, description) of every active skill not in `shown` (nor of another project
    than `project`), pinned ones first."""
    skills = [s for s in SkillCatalog(dirs).list("active") if _served(s, shown, project)]
    skills.sort(key=lambda s: (not s.pinned, s.name))
    return [(s.name, _about(s)) for s in skills]


def relevant(
    dirs: DataDir,
    prompt: str,
    shown: Collection[str] = (),
    limit: int = MAX_PROMPT_SKILLS,
    project: str | None = None,
) -> list[tuple[str, str]]:
    """(name, description) of up to `limit` active skills matching `prompt`, best first,
    leaving out those in `shown` and another project's."""
    catalog = SkillCatalog(dirs).list("active")
    skills = {s.name: s for s in catalog if _served(s, shown, project)}
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

"""The skills part of the `recall` prompt (docs/skills.md): up to 3 relevant active skills not yet
injected in this caller's session, each with its name, description and `skill://` URI, and its
body too when that fits what is left of the prompt's budget."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from dreamwell.server.mcp.projects import serves
from dreamwell.stores import StoreError

if TYPE_CHECKING:
    from dreamwell.stores import Skill, SkillCatalog

logger = logging.getLogger(__name__)

HEADER = "Skills that may apply (read the skill:// resource, or get the prompt of that name):"
MAX_SKILLS = 3
_CALLERS_KEPT = 1024


class InjectedSkills:
    """Which skills each caller has been shown (bounded, least recent caller dropped)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str], set[str]] = OrderedDict()

    def fresh(self, caller: tuple[str, str], names: list[str]) -> list[str]:
        seen = self._seen.get(caller, set())
        return [n for n in names if n not in seen]

    def mark(self, caller: tuple[str, str], names: list[str]) -> None:
        self._seen.setdefault(caller, set()).update(names)
        self._seen.move_to_end(caller)
        while len(self._seen) > _CALLERS_KEPT:
            self._seen.popitem(last=False)


def _entry(skill: Skill, with_body: bool) -> str:
    line = f"- {skill.name}: {skill.description} (skill://{skill.name}/SKILL.md)"
    return line + "\n" + skill.body.strip() if with_body else line


def skills_section(
    catalog: SkillCatalog,
    injected: InjectedSkills,
    caller: tuple[str, str],
    message: str,
    room: int,
    project: str | None = None,
) -> str:
    """The section (empty when nothing fits or applies); `room`: characters left in the
    prompt's budget for skill bodies (entries without bodies are always shown). With
    `project`, another project's skills are left out (docs/projects.md)."""
    if not message.strip():
        return ""
    try:
        hits = catalog.search(message, limit=MAX_SKILLS * 3)
    except StoreError as exc:
        logger.warning("skills not searched: %s", exc)
        return ""
    by_name = {s.name: s for s, _ in hits if serves(s, project)}
    chosen = [by_name[n] for n in injected.fresh(caller, list(by_name))][:MAX_SKILLS]
    if not chosen:
        return ""
    lines = []
    left = room - len(HEADER) - sum(len(_entry(s, False)) + 1 for s in chosen)
    for skill in chosen:
        extra = len(skill.body.strip()) + 1
        with_body = extra <= left
        left -= extra if with_body else 0
        lines.append(_entry(skill, with_body))
    injected.mark(caller, [s.name for s in chosen])
    return "\n".join([HEADER, *lines])

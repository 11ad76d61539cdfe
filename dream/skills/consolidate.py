"""Skill consolidation (docs/skills.md, seed 001 pass 3): the LLM sees every skill with its body,
uses in 30 days, `[sparse-content]` marks, the top co-used pairs and the name-prefix
clusters, and proposes merges, parent guides, see-also links and deletions. The host keeps
seed 001's guard (a deletion with no replacement saved in the same answer discards the whole
pass), refuses merges that lose a command, path, URL or number, never touches a pinned skill,
archives instead of deleting, and gives a merge the earliest created time and its sources'
uses (hence their latest use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field, field_validator

from dreamwell.dream import directives
from dreamwell.dream.answers import SHOWN_ID, Answer, ask_for
from dreamwell.dream.llm import LLMCancelled, LLMError
from dreamwell.dream.report import PassResult
from dreamwell.dream.skills.commit import Group, SkillContext, Step, commit
from dreamwell.dream.skills.rules import (
    copied,
    lost_facts,
    prefix_clusters,
    rewritten_md,
    skill_md,
    slug,
    sparse,
    unrelated,
)
from dreamwell.stores import NEW, InvalidInput, Skill, SkillChange, make_folder

SKILLS_PER_PROMPT = 12  # bodies cut at 800 characters: a prompt fits an 8k context
CO_USED = 10


class SavedSkill(Answer):
    name: str = Field(examples=["<a shown skill's name, or a new one>"])
    description: str = Field(examples=["<what it does and when to use it>"])
    body: str = Field(examples=["<the steps, keeping every command, path, URL and number>"])
    source_names: list[str] = Field(
        json_schema_extra={SHOWN_ID: True},
        examples=[["<name of a shown skill it merges>", "<name of another>"]],
    )
    see_also: list[str] = Field(
        default_factory=list,
        json_schema_extra={SHOWN_ID: True},
        examples=[["<name of a related shown skill>"]],
    )


class SkillPlan(Answer):
    to_delete: list[str] = Field(
        json_schema_extra={SHOWN_ID: True}, examples=[["<name of a redundant shown skill>"]]
    )
    to_save: list[SavedSkill]

    @field_validator("to_delete", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:  # {"name": …} items are taken for their name
        if isinstance(value, list):
            return [v.get("name", "") if isinstance(v, dict) else v for v in value]
        return value


def _prompt(shown: Sequence[Skill], ctx: SkillContext) -> str:
    stats = ctx.usage.stats(ctx.now)
    names = {s.name for s in shown}
    lines = ["Skills:"]
    for s in shown:
        marks = " [sparse-content]" if sparse(s, ctx.now) else ""
        marks += " [pinned: never changed]" if s.pinned else ""
        lines.append(
            f"## {s.name} ({s.status}, uses in 30 days: {stats.uses_30d.get(s.name, 0)}){marks}"
        )
        lines.append(f"description: {s.description[:300]}")
        lines.append(s.body.strip()[:800])
    pairs = [(a, b, n) for a, b, n in stats.co_used if a in names and b in names][:CO_USED]
    lines += ["", "Co-used pairs (used in the same session):"]
    lines += [f"- {a} + {b}: {n} session(s)" for a, b, n in pairs] or ["- (none)"]
    lines += ["", "Prefix clusters:"]
    clusters = prefix_clusters(names)
    lines += [f"- {p}-*: {', '.join(ns)}" for p, ns in clusters.items()] or ["- (none)"]
    return "\n".join(lines)


class _Planner:
    """Turns one chunk's answer into groups of changes, or finds a guard violation."""

    def __init__(self, ctx: SkillContext, shown: Sequence[Skill]) -> None:
        self.ctx, self.shown = ctx, {s.name: s for s in shown}
        self.used: set[str] = set()
        self.notes: list[str] = []
        self.groups: list[Group] = []

    def plan(self, answer: SkillPlan) -> str:
        """The guard first: every deletion must be a source of a skill saved in the answer,
        else the whole pass is discarded (returns why)."""
        replaced = {n for item in answer.to_save for n in item.source_names}
        orphans = [n for n in answer.to_delete if n not in replaced]
        if orphans:
            return (
                f"the answer deletes {', '.join(orphans[:5])} without saving a replacement "
                "(seed 001's guard): the whole consolidation is skipped"
            )
        for item in answer.to_save:
            group = self._item(item)
            if isinstance(group, str):
                self.notes.append(group)
            elif group is not None:
                self.groups.append(group)
        return ""

    def _see_also(self, item: SavedSkill, name: str) -> tuple[str, ...]:
        live = {s.name for s in self.ctx.catalog.list(("active", "candidate"))}
        return tuple(n for n in dict.fromkeys(item.see_also) if n in live and n != name)

    def _item(self, item: SavedSkill) -> Group | str | None:
        name = slug(item.name)
        if copied(item.name) or copied(item.body) or copied(item.description):
            return f"ignored a placeholder skill {name[:60]!r}"
        sources = [n for n in dict.fromkeys(item.source_names) if n in self.shown]
        if name in self.shown and name not in sources:
            sources.insert(0, name)
        taken = [n for n in sources if n in self.used]
        pinned = [n for n in sources if self.shown[n].pinned]
        if taken or pinned:
            which = "pinned" if pinned else "already merged in this answer"
            return f"refused {name!r}: {', '.join(pinned or taken)} {which}"
        if not sources:
            return self._guide(item, name)
        texts = [f"{n} {self.shown[n].description} {self.shown[n].body}" for n in sources]
        if unrelated(texts):
            return f"refused merge of {sources} into {name!r}: they have too little in common"
        lost = lost_facts("\n".join(self.shown[n].body for n in sources), item.body)
        if lost:
            return f"refused merge of {sources} into {name!r}: it drops {', '.join(lost[:8])}"
        self.used.update(sources)
        return self._merge(item, name, sources)

    def _guide(self, item: SavedSkill, name: str) -> Group | str:
        clusters = prefix_clusters(self.shown)
        prefix = name.split("-")[0]
        if prefix not in clusters or self.ctx.catalog.find(name) is not None:
            return f"refused new skill {name!r}: not a parent guide of a shown prefix cluster"
        md = _md(name, item.description, item.body)
        if isinstance(md, str):
            return md
        see = self._see_also(item, name) or tuple(clusters[prefix])
        change = SkillChange(
            name, NEW, {"SKILL.md": md}, self.ctx.new_status, origin="dream", see_also=see
        )
        note = f"parent guide of {prefix}-*"
        return Group([Step(change, None, "skill-guide", tuple(clusters[prefix]), note)])

    def _merge(self, item: SavedSkill, name: str, sources: list[str]) -> Group | str | None:
        see = self._see_also(item, name)
        base = self.shown.get(name)
        src = [self.shown[n] for n in sources]
        if base is None and self.ctx.catalog.find(name) is not None:
            return f"refused {name!r}: a skill of that name exists and was not shown"
        files_md: bytes | str = (
            rewritten_md(base, item.description, item.body)
            if base is not None
            else _md(name, item.description, item.body)
        )
        if isinstance(files_md, str):
            return files_md
        try:
            make_folder(None, {**(base.files if base else {}), "SKILL.md": files_md}, name)
        except InvalidInput as exc:
            return f"refused {name!r}: {exc}"
        if len(sources) == 1 and base is not None:
            return self._update(base, item, files_md, see)
        earliest = min(s.created_at for s in src)
        status = "active" if any(s.status == "active" for s in src) else "candidate"
        files = {**(base.files if base else {}), "SKILL.md": files_md}
        expect = base.revision if base else NEW
        main = SkillChange(
            name,
            expect,
            files,
            status,
            origin=None if base else "dream",
            see_also=see,
            created_at=earliest,
        )
        steps = [Step(main, base, "skill-merge", tuple(sources), f"merged {len(sources)} skills")]
        for s in src:
            if s.name != name:
                gone = SkillChange(s.name, s.revision, status="archived")
                steps.append(Step(gone, s, "skill-archive", (name,), f"merged into {name}"))
        copies = [(s.name, name) for s in src if s.name != name]
        return Group(steps, copies)

    def _update(
        self, base: Skill, item: SavedSkill, md: bytes, see: tuple[str, ...]
    ) -> Group | None:
        same_body = " ".join(item.body.split()) == " ".join(base.body.split())
        if same_body and see == base.see_also:
            return None
        files = None if same_body else {**base.files, "SKILL.md": md}
        kind = "skill-see-also" if same_body else "skill-update"
        change = SkillChange(base.name, base.revision, files, see_also=see)
        return Group([Step(change, base, kind, (base.name,), "")])


def _md(name: str, description: str, body: str) -> bytes | str:
    try:
        files = {"SKILL.md": skill_md(name, description, body)}
        make_folder(None, files, f"skill {name!r}")
    except InvalidInput as exc:
        return f"refused new skill {name!r}: {exc}"
    return files["SKILL.md"]


def _chunks(skills: Sequence[Skill]) -> list[list[Skill]]:
    ordered = sorted(skills, key=lambda s: s.name)  # prefix clusters stay together
    return [ordered[i : i + SKILLS_PER_PROMPT] for i in range(0, len(ordered), SKILLS_PER_PROMPT)]


def consolidation_pass(ctx: SkillContext, result: PassResult) -> PassResult:
    """Plan every chunk first (seed 001's guard may discard all of it), then write."""
    skills = ctx.catalog.list(("active", "candidate"))
    if len(skills) < 2:
        result.status, result.reason = "skipped", f"{len(skills)} skill(s): nothing to consolidate"
        return result
    system = directives.directive(ctx.data_dir, "skill-dream.md", directives.SKILL_DREAM)
    groups: list[Group] = []
    for shown in _chunks(skills):
        if len(shown) < 2:
            continue
        ids = [s.name for s in shown]
        try:
            answer = ask_for(
                ctx.llm, system, _prompt(shown, ctx), SkillPlan, ids, ctx.cancel, result.notes
            )
        except LLMCancelled:
            raise
        except LLMError as exc:
            result.notes.append(f"skipped a chunk of {len(shown)} skills: {exc}")
            continue
        planner = _Planner(ctx, shown)
        violation = planner.plan(answer)
        if violation:
            result.status, result.reason = "skipped", violation
            return result
        result.notes += planner.notes
        groups += planner.groups
    commit(ctx, result, groups)
    return result

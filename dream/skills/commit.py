"""Writing and undoing the skill passes' changes (docs/skills.md): every group of changes is written
compare-and-set against the revisions the pass read (a merge and the archiving of its sources
stand or fall together; pinned skills are refused), each written change goes into the cycle's
report with the skill's whole record before and after, and undo writes those records back
exactly — skipping, and naming, skills changed since."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamwell.dream.llm import LLM
from dreamwell.dream.report import Change, PassResult, Report
from dreamwell.stores import (
    DataDir,
    Skill,
    SkillCatalog,
    SkillChange,
    SkillUsage,
    StoreError,
    skill_from_json,
    skill_to_json,
)

logger = logging.getLogger(__name__)
RUN_KEY = "dream_run"  # usage records a merge copied to its target carry the cycle's run


@dataclass
class SkillContext:
    """What every skill pass works with."""

    catalog: SkillCatalog
    usage: SkillUsage
    llm: LLM
    data_dir: Path
    run: str
    now: datetime
    auto_approve: bool = False
    dry_run: bool = False
    cancel: threading.Event | None = None
    saved: Callable[[], object] = field(default=lambda: None)

    @staticmethod
    def open(data_dir: Path, llm: LLM, run: str, now: datetime, **kw: Any) -> SkillContext:
        layout = DataDir(data_dir)
        return SkillContext(SkillCatalog(layout), SkillUsage(layout), llm, data_dir, run, now, **kw)

    @property
    def new_status(self) -> str:
        """New skills from the dream are candidates unless `skills_auto_approve` is on."""
        return "active" if self.auto_approve else "candidate"


@dataclass(frozen=True)
class Step:
    """One skill's change in a group: the change (its `expect` is the revision the pass
    read), the record read (None: a new skill), and how the report names it."""

    change: SkillChange
    before: Skill | None
    kind: str
    sources: tuple[str, ...] = ()
    note: str = ""


@dataclass
class Group:
    steps: list[Step]
    copies: list[tuple[str, str]] = field(default_factory=list)  # usage (from skill, to skill)


def record(skill: Skill | None) -> dict[str, Any] | None:
    return None if skill is None else dict(json.loads(skill_to_json(skill)))


def _planned(step: Step) -> dict[str, Any]:
    """A dry run's image of the change: what it would write."""
    out: dict[str, Any] = {"name": step.change.name, "planned": True}
    if step.change.status is not None:
        out["status"] = step.change.status
    if step.change.files is not None:
        out["SKILL.md"] = step.change.files["SKILL.md"].decode("utf-8")
    return out


def commit(ctx: SkillContext, result: PassResult, groups: Sequence[Group]) -> None:
    """Write each group whole or not at all; a group that meets a moved revision or a pinned
    skill is skipped and named in the notes (`conflict: …`). The report is saved after each."""
    for group in groups:
        if ctx.cancel is not None and ctx.cancel.is_set():
            return
        if ctx.dry_run:
            result.changes += [_change(s, record(s.before), _planned(s)) for s in group.steps]
            continue
        done = ctx.catalog.apply([s.change for s in group.steps], refuse_pinned=True, whole=True)
        if done.conflicts:
            names = ", ".join(s.change.name for s in group.steps)
            why = "; ".join(c.reason for c in done.conflicts)
            result.notes.append(f"conflict: skipped {group.steps[0].kind} of [{names}]: {why}")
            continue
        written = {s.name: s for s in done.written}
        result.changes += [
            _change(s, record(s.before), record(written[s.change.name])) for s in group.steps
        ]
        _copy_usage(ctx, group.copies, result)
        ctx.saved()


def _change(step: Step, before: dict[str, Any] | None, after: dict[str, Any] | None) -> Change:
    return Change(step.kind, None, None, step.sources, step.note, before, after)


def _copy_usage(ctx: SkillContext, copies: Sequence[tuple[str, str]], result: PassResult) -> None:
    """A merge sums its sources' uses: their use records are copied to the merged skill (with
    their times, so the latest last use carries over), marked with the run for undo."""
    if not copies:
        return
    wanted = dict(copies)
    try:
        for use in ctx.usage.log.read():
            target = wanted.get(str(use.get("skill")))
            if target is None or RUN_KEY in use:
                continue
            when = datetime.fromisoformat(str(use["ts"]))
            extra = {k: v for k, v in use.items() if k not in ("ts", "skill")}
            ctx.usage.log.append({**extra, "skill": target, RUN_KEY: ctx.run}, now=when)
    except (StoreError, KeyError, ValueError) as exc:
        result.notes.append(f"the merged skills' uses were not carried over: {exc}")


def undo_skills(data_dir: Path, report: Report) -> list[str]:
    """Write back every skill record the cycle changed, newest first, each only if the skill
    is still at the revision the cycle left it; drop the use records its merges copied.
    Returns notes naming what was kept because it changed since."""
    changes = [c for p in report.passes for c in p.changes if c.is_skill]
    if not changes:
        return []
    layout = DataDir(data_dir)
    reverts: list[tuple[str, int | None, Skill | None]] = []
    for c in reversed(changes):
        after, before = c.skill_after, c.skill_before
        name = str((after or before or {}).get("name", ""))
        expect = None if after is None else int(after["revision"])
        old = None if before is None else skill_from_json(json.dumps(before))
        reverts.append((name, expect, old))
    done = SkillCatalog(layout).revert(reverts)
    notes = [f"undo skipped skill {c.name}: {c.reason}; kept as it is" for c in done.conflicts]
    try:
        SkillUsage(layout).log.drop(lambda use: use.get(RUN_KEY) != report.run)
    except StoreError as exc:
        notes.append(f"undo could not drop the uses the cycle's merges copied: {exc}")
    return notes

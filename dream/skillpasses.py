"""The three skill passes of a dream cycle (SPEC §7, seed 001 passes 2–4), run before memory
consolidation: gap detection (new skills for requests seen in two or more sessions),
consolidation (merges, parent guides, see-also, pruning, with seed 001's deletion guard) and
optimisation (at-risk and sparse skills rewritten, under the body guard). Each has its
directive file and its answer model; the host disposes (dream/skillrules.py) and every write
is compare-and-set (dream/skillcommit.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from dreamwell.dream import directives
from dreamwell.dream.answers import SHOWN_ID, Answer, ask_for
from dreamwell.dream.llm import LLM, LLMCancelled, LLMError
from dreamwell.dream.report import PassResult, Report
from dreamwell.dream.skillcommit import Group, SkillContext, Step, commit
from dreamwell.dream.skillconsolidate import consolidation_pass
from dreamwell.dream.skilloptimize import optimisation_pass
from dreamwell.dream.skillrules import (
    MIN_SESSIONS,
    Session,
    copied,
    covers,
    invented,
    recurring_terms,
    sessions_of,
    slug,
    terms,
)
from dreamwell.stores import NEW, InvalidInput, SkillChange, SkillUsage, StoreError, make_folder

logger = logging.getLogger(__name__)
SKILL_PASSES = ("skill-gap", "skill-consolidation", "skill-optimisation")
SESSIONS_PER_PROMPT = 12  # with 3 turns of 200 characters: ~3k tokens, for small models
MAX_SESSIONS = 60


def skill_md(name: str, description: str, body: str) -> bytes:
    """A new skill's SKILL.md: name and description (a YAML double-quoted string) and body."""
    head = f"---\nname: {name}\ndescription: {json.dumps(description.strip())}\n---\n\n"
    return (head + body.strip() + "\n").encode("utf-8")


class NewSkill(Answer):
    name: str = Field(examples=["<lowercase-hyphenated-name>"])
    description: str = Field(examples=["<what it does and when to use it>"])
    body: str = Field(examples=["<the steps, with the user's commands, paths and URLs>"])
    sessions: list[str] = Field(
        json_schema_extra={SHOWN_ID: True},
        examples=[["<id of a session asking for it>", "<id of another session asking for it>"]],
    )


class SkillGaps(Answer):
    to_save: list[NewSkill]


def _chunks(sessions: list[Session], recurring: list[tuple[str, int]]) -> list[list[Session]]:
    """The newest sessions, ordered by their most recurring term so that sessions asking for
    the same thing share a prompt, cut into prompts of SESSIONS_PER_PROMPT."""
    rank = {t: i for i, (t, _) in enumerate(recurring)}

    def key(s: Session) -> int:
        return min((rank[t] for t in terms(s.first) if t in rank), default=len(rank))

    shown = sorted(sessions[-MAX_SESSIONS:], key=key)
    return [shown[i : i + SESSIONS_PER_PROMPT] for i in range(0, len(shown), SESSIONS_PER_PROMPT)]


def _gap_prompt(
    chunk: Sequence[Session], recurring: Sequence[tuple[str, int]], ctx: SkillContext
) -> str:
    lines = ["Recurring topics across sessions (term frequency >= 2 sessions):"]
    lines += [f'- "{t}": {n} session(s)' for t, n in recurring]
    lines += ["", "Sessions (the user's requests, first one first):"]
    for s in chunk:
        said = " / ".join(t[:200] for t in s.turns[:3])
        lines.append(f"- session={s.id}: {said}")
    skills = ctx.catalog.list(("active", "candidate"))
    lines += ["", "Existing skills:"]
    lines += [f"- {k.name}: {k.description[:200]}" for k in skills] or ["- (none)"]
    return "\n".join(lines)


def _new_skill(item: NewSkill, chunk: dict[str, Session], ctx: SkillContext) -> Group | str:
    """A group creating the skill, or why it is refused."""
    name, cited = slug(item.name), [s for s in dict.fromkeys(item.sessions) if s in chunk]
    if copied(item.name) or copied(item.description) or copied(item.body):
        return f"ignored a placeholder skill {name[:60]!r}"
    if len(cited) < MIN_SESSIONS:
        return (
            f"refused new skill {name!r}: it cites {len(cited)} known session(s); a new skill "
            f"needs a kind of request seen in >= {MIN_SESSIONS} sessions"
        )
    sessions = [chunk[s] for s in cited]
    if not covers(sessions, f"{name} {item.description}"):
        return f"refused new skill {name!r}: the sessions it cites do not ask for it"
    made = invented(item.body, "\n".join(t for s in sessions for t in s.turns))
    if made:
        return f"refused new skill {name!r}: its body invents {', '.join(made[:5])}"
    if ctx.catalog.find(name) is not None:
        return f"refused new skill {name!r}: a skill of that name exists"
    try:
        files = {"SKILL.md": skill_md(name, item.description, item.body)}
        make_folder(None, files, f"skill {name!r}")
    except InvalidInput as exc:
        return f"refused new skill {name!r}: {exc}"
    change = SkillChange(name, NEW, files, ctx.new_status, origin="dream")
    note = f"asked for in sessions {', '.join(cited)}"
    return Group([Step(change, None, "skill-create", tuple(cited), note)])


def gap_pass(
    ctx: SkillContext, result: PassResult, conversation: Sequence[dict[str, Any]]
) -> PassResult:
    """Skills for recurring requests: one prompt per chunk of sessions (a chunk whose answer
    stays bad is skipped with a note); the host checks every proposal against the log."""
    sessions = sessions_of(conversation)
    recurring = recurring_terms(sessions)
    if len(sessions) < MIN_SESSIONS or not recurring:
        result.status = "skipped"
        result.reason = f"no request recurs across sessions ({len(sessions)} session(s) logged)"
        return result
    system = directives.directive(ctx.data_dir, "skill-gap.md", directives.SKILL_GAP)
    for chunk in _chunks(sessions, recurring):
        if len(chunk) < MIN_SESSIONS:
            continue
        prompt = _gap_prompt(chunk, recurring, ctx)
        ids = [s.id for s in chunk]
        try:
            answer = ask_for(ctx.llm, system, prompt, SkillGaps, ids, ctx.cancel, result.notes)
        except LLMCancelled:
            raise
        except LLMError as exc:
            result.notes.append(f"skipped a chunk of {len(chunk)} sessions: {exc}")
            continue
        by_id, groups, names = {s.id: s for s in chunk}, [], set()
        for item in answer.to_save:
            planned = _new_skill(item, by_id, ctx)
            if isinstance(planned, str) or slug(item.name) in names:
                result.notes.append(planned if isinstance(planned, str) else "ignored a repeat")
                continue
            names.add(slug(item.name))
            groups.append(planned)
        commit(ctx, result, groups)
    return result


def usage_note(data_dir: Path, now: datetime) -> str:
    """Without an LLM the skill passes only keep the books: what the usage log says."""
    stats = SkillUsage(data_dir).stats(now)
    top = sorted(stats.uses_30d.items(), key=lambda p: (-p[1], p[0]))[:5]
    used = ", ".join(f"{n} {u}" for n, u in top) or "none"
    pairs = len(stats.co_used)
    return (
        f"usage: {len(stats.uses_30d)} skill(s) used in 30 days ({used}); {pairs} co-used pair(s)"
    )


def _without_llm(
    data_dir: Path,
    reason: str,
    report: Report,
    now: datetime,
    progress: Callable[[str], None] | None,
) -> None:
    try:
        notes = [usage_note(data_dir, now)]
    except (OSError, StoreError) as exc:
        notes = [f"the usage log could not be read: {exc}"]
    for name in SKILL_PASSES:
        if progress is not None:
            progress(name)
        report.passes.append(PassResult(name, "skipped", f"no LLM: {reason}", [], list(notes)))


def run_skill_passes(
    data_dir: Path,
    llm: LLM | None,
    no_llm_reason: str,
    report: Report,
    feeds: tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]], Sequence[dict[str, Any]]],
    now: datetime,
    progress: Callable[[str], None] | None = None,
    saved: Callable[[], object] = lambda: None,
    **options: Any,
) -> None:
    """The three passes in order, each in the report; `feeds`: (conversation, feedback,
    corrections). A failing pass is reported and the next still runs; a cancel propagates."""
    conversation, feedback, corrections = feeds
    if llm is None:
        _without_llm(data_dir, no_llm_reason, report, now, progress)
        return
    ctx = SkillContext.open(
        data_dir, llm, report.run, now, dry_run=report.dry_run, saved=saved, **options
    )
    steps: list[Callable[[PassResult], PassResult]] = [
        lambda r: gap_pass(ctx, r, conversation),
        lambda r: consolidation_pass(ctx, r),
        lambda r: optimisation_pass(ctx, r, conversation, feedback, corrections),
    ]
    for name, step in zip(SKILL_PASSES, steps, strict=True):
        if progress is not None:
            progress(name)
        result = PassResult(name)
        report.passes.append(result)
        try:
            step(result)  # it fills `result` as it writes, so every save holds what it wrote
        except LLMCancelled:
            result.status, result.reason = "partial", "cancelled"
            raise
        except Exception as exc:  # a failing pass is reported; the others still run
            logger.exception("dream pass %s failed", name)
            result.status = "partial" if result.changes else "failed"
            result.reason = f"{type(exc).__name__}: {exc}"
        saved()

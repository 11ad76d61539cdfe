"""Skill optimisation (docs/skills.md, seed 001 pass 4): at-risk skills — used in a session with
Correction feedback or a session summary rated poor or fair — go to the LLM with their failure
context, sparse skills with the structural review note, one skill per prompt. The body guard:
the answer replaces the body only when it keeps the skill's name and every command, path, URL
and number of the old body that the failure context does not name (as wrong)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from dreamwell.dream import directives
from dreamwell.dream.answers import SHOWN_ID, Answer, ask_for
from dreamwell.dream.llm import LLMCancelled, LLMError
from dreamwell.dream.report import PassResult
from dreamwell.dream.skills.commit import Group, SkillContext, Step, commit
from dreamwell.dream.skills.rules import copied, lost_facts, rewritten_md, sessions_of, sparse
from dreamwell.stores import InvalidInput, Skill, SkillChange, make_folder

REVIEW_NOTE = (
    "### Review note: This skill has minimal content.\n"
    "Expand it with concrete steps, examples, and edge cases."
)
MAX_REVIEWED = 10  # skills per cycle: one LLM call each
SUMMARY_KINDS = ("sessionsummary", "session-summary", "session_summary", "summary")


class ImprovedSkill(Answer):
    name: str = Field(json_schema_extra={SHOWN_ID: True}, examples=["<the skill's name>"])
    body: str = Field(examples=["<the improved body: every command, path, URL and number kept>"])
    reason: str = Field(examples=["<the step or gap that caused the failure, in a sentence>"])


def _rating(record: dict[str, Any]) -> str:
    rating = str(record.get("rating") or "").lower()
    if rating:
        return rating
    words = str(record.get("detail", "")).lower().replace(":", " ").split()
    return next((w for w in words[:3] if w in ("poor", "fair", "good", "excellent")), "")


def failures(
    feedback: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    conversation: Sequence[dict[str, Any]],
) -> dict[str, list[str]]:
    """Failure context per session: its corrections, its summary rated poor or fair, and the
    user's turns in it."""
    out: defaultdict[str, list[str]] = defaultdict(list)
    for c in corrections:
        out[str(c.get("session", ""))].append(f"correction: {str(c.get('detail', ''))[:400]}")
    for f in feedback:
        kind = str(f.get("kind", "")).lower()
        if kind in SUMMARY_KINDS and _rating(f) in ("poor", "fair"):
            detail = str(f.get("detail", ""))[:400]
            out[str(f.get("session", ""))].append(f"session summary ({_rating(f)}): {detail}")
    turns = {s.id: s.turns for s in sessions_of(conversation)}
    for session, lines in out.items():
        lines += [f"user said: {t[:300]}" for t in turns.get(session, [])[:6]]
    return dict(out)


def _reviewed(ctx: SkillContext, failed: dict[str, list[str]]) -> list[tuple[Skill, str]]:
    """(skill, what it is reviewed for): at-risk first, then sparse; pinned skills never."""
    sessions: defaultdict[str, set[str]] = defaultdict(set)
    for use in ctx.usage.log.read():
        sessions[str(use.get("skill"))].add(str(use.get("session")))
    out: list[tuple[Skill, str]] = []
    skills = [s for s in ctx.catalog.list(("active", "candidate")) if not s.pinned]
    for skill in skills:
        bad = sorted(sessions[skill.name] & set(failed))
        if bad:
            context = [f"- session {b}: {line}" for b in bad for line in failed[b]]
            out.append((skill, "### Failure context\n" + "\n".join(context)[:4000]))
    out += [(s, REVIEW_NOTE) for s in skills if sparse(s, ctx.now) and s not in [k for k, _ in out]]
    return out[:MAX_REVIEWED]


def _improved(skill: Skill, answer: ImprovedSkill, context: str) -> Group | str:
    if answer.name.strip() != skill.name:
        return f"refused improvement of {skill.name!r}: the answer renames it {answer.name!r}"
    if copied(answer.body) or not answer.body.strip():
        return f"ignored a placeholder improvement of {skill.name!r}"
    if " ".join(answer.body.split()) == " ".join(skill.body.split()):
        return f"kept {skill.name!r}: the answer did not change it"
    lost = lost_facts(skill.body, answer.body, context)
    if lost:
        return f"refused improvement of {skill.name!r}: it drops {', '.join(lost[:8])}"
    md = rewritten_md(skill, "", answer.body)
    try:
        make_folder(None, {**skill.files, "SKILL.md": md}, skill.name)
    except InvalidInput as exc:
        return f"refused improvement of {skill.name!r}: {exc}"
    change = SkillChange(skill.name, skill.revision, {**skill.files, "SKILL.md": md})
    why = "at risk" if context.startswith("### Failure") else "sparse"
    return Group([Step(change, skill, "skill-improve", (), f"{why}: {answer.reason[:200]}")])


def optimisation_pass(
    ctx: SkillContext,
    result: PassResult,
    conversation: Sequence[dict[str, Any]],
    feedback: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
) -> PassResult:
    """One prompt per reviewed skill; each answer stands or falls alone."""
    reviewed = _reviewed(ctx, failures(feedback, corrections, conversation))
    if not reviewed:
        result.status, result.reason = "skipped", "no at-risk or sparse skills"
        return result
    system = directives.directive(ctx.data_dir, "skill-optimize.md", directives.SKILL_OPTIMIZE)
    for skill, context in reviewed:
        prompt = (
            f"Skill {skill.name}\ndescription: {skill.description}\n\n"
            f"Body:\n{skill.body.strip()[:6000]}\n\n{context}"
        )
        try:
            answer = ask_for(
                ctx.llm, system, prompt, ImprovedSkill, [skill.name], ctx.cancel, result.notes
            )
        except LLMCancelled:
            raise
        except LLMError as exc:
            result.notes.append(f"skipped {skill.name!r}: {exc}")
            continue
        group = _improved(skill, answer, context)
        if isinstance(group, str):
            result.notes.append(group)
        else:
            commit(ctx, result, [group])
    return result

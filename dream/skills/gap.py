"""Gap detection, the first skill pass (docs/skills.md, seed 001 pass 2): new skills for requests
seen in two or more sessions of the conversation log. The LLM proposes; the host checks every
proposal against the log (dream/skills/rules.py) and writes it compare-and-set
(dream/skills/commit.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from dreamwell.dream import directives
from dreamwell.dream.answers import SHOWN_ID, Answer, ask_for
from dreamwell.dream.llm import LLMCancelled, LLMError
from dreamwell.dream.report import PassResult
from dreamwell.dream.skills.commit import Group, SkillContext, Step, commit
from dreamwell.dream.skills.rules import (
    MIN_SESSIONS,
    Session,
    copied,
    covers,
    invented,
    recurring_terms,
    sessions_of,
    sessions_project,
    skill_md,
    slug,
    terms,
)
from dreamwell.stores import NEW, InvalidInput, SkillChange, make_folder

SESSIONS_PER_PROMPT = 12  # with 3 turns of 200 characters: ~3k tokens, for small models
MAX_SESSIONS = 60


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
    # learned from one project's sessions alone: that project's skill (docs/projects.md)
    project = sessions_project(sessions)
    change = SkillChange(name, NEW, files, ctx.new_status, origin="dream", project=project)
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

"""The dream passes. Each takes the current snapshot of entries and returns the changes it
proposes; the cycle decides whether to apply them."""

from __future__ import annotations

import logging
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from dreamwell.dream import directives
from dreamwell.dream.answers import SAVE_REF, SHOWN_ID, Answer, ask_for
from dreamwell.dream.grouping import GROUP_PROMPT, neighbour_groups, pack_prompts
from dreamwell.dream.llm import LLM, LLMCancelled, LLMError
from dreamwell.dream.report import Change, PassResult
from dreamwell.dream.rules import (
    DecayPolicy,
    decay,
    distinct_episodes,
    dropped_facts,
    grounded,
    high_value,
    merged,
    mixed_projects,
    placeholder,
    project_key,
    prunable,
    task_request,
    too_short,
    unrelated_sources,
)
from dreamwell.dream.rules import scored as ema
from dreamwell.stores import (
    InvalidInput,
    MemoryEntry,
    VectorLike,
    check_category,
    check_tags,
    fold_text,
    new_id,
)

logger = logging.getLogger(__name__)
Snapshot = dict[str, MemoryEntry]
CHUNK = 40
SENSITIVE = re.compile(
    r"password|credential|secret|token|api key|\bkeys?\b|security|bank|payment|money|"
    r"financ|invest|credit card|salary|\$|€|£",
    re.I,
)
PREFERENCE_THRESHOLD = {"strong": 1, "mild": 2, "casual": 3}


def live(snapshot: Snapshot) -> list[MemoryEntry]:
    return [e for e in snapshot.values() if e.live]


def decay_pass(snapshot: Snapshot, now: datetime, policy: DecayPolicy) -> PassResult:
    result = PassResult("decay")
    for entry in live(snapshot):
        after = decay(entry, now, policy)
        if after != entry:
            result.changes.append(Change("decay", entry, after))
    return result


def _merge_changes(
    sources: Sequence[MemoryEntry], merged_entry: MemoryEntry, now: datetime
) -> list[Change]:
    ids = tuple(s.id for s in sources)
    out = [Change("merge", None, merged_entry, ids)]
    out += [
        Change("archive", s, replace(s, archived_at=now), (merged_entry.id,), "merged")
        for s in sources
    ]
    return out


def exact_duplicates_pass(snapshot: Snapshot, now: datetime) -> PassResult:
    """Entries with the same folded text in the same category become one (host arithmetic)."""
    result = PassResult("exact-duplicates")
    groups: dict[tuple[str, str, str], list[MemoryEntry]] = defaultdict(list)
    for entry in live(snapshot):
        folded = fold_text(entry.content) or entry.content
        groups[(entry.category or "", folded, project_key(entry))].append(entry)
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda e: (e.created_at, e.id))
        tags = [t for e in group for t in e.tags][:32]
        entry = merged(group, group[0].content, group[0].category, tags, None, now)
        result.changes += _merge_changes(group, entry, now)
    return result


ID_EXAMPLE = "<id of a shown entry>"


class PlannedEntry(Answer):
    content: str = Field(
        examples=["<the merged fact, keeping every name, number and date of its sources>"]
    )
    category: str | None = Field(default=None, examples=["<category/subcategory>"])
    tags: list[str] = Field(default_factory=list, examples=[["<tag>"]])
    source_ids: list[str] = Field(
        json_schema_extra={SHOWN_ID: True}, examples=[[ID_EXAMPLE, "<id of another shown entry>"]]
    )
    importance: float | None = Field(default=None, ge=0.0, le=1.0, examples=[0.5])


class Deletion(Answer):
    id: str = Field(json_schema_extra={SHOWN_ID: True}, examples=["<id of a superseded entry>"])
    superseded_by: str = Field(
        json_schema_extra={SHOWN_ID: "or-save"},
        examples=["<id of the shown entry that replaces it, or save:N>"],
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_id(cls, value: Any) -> Any:  # an old-style "toDelete": ["id"] names no successor
        return {"id": value, "supersededBy": ""} if isinstance(value, str) else value


class ConsolidationPlan(Answer):
    to_delete: list[Deletion]
    to_save: list[PlannedEntry]


def _entry_line(n: int, e: MemoryEntry) -> str:
    subject = e.metadata.get("subjectTime") or "-".join(
        v for v in (e.metadata.get("subjectTimeStart"), e.metadata.get("subjectTimeEnd")) if v
    )
    return (
        f"{n}. id={e.id} category={e.category or '-'} tags={','.join(e.tags) or '-'} "
        f"first={e.created_at.date()} last={e.last_seen_at.date()} "
        f"reinforced={e.reinforcement_count}× importance={e.importance:.2f}"
        + (f" subject={subject}" if subject else "")
        + f": {e.content[:600]}"
    )


def consolidation_prompts(
    entries: Sequence[MemoryEntry],
    vectors: Mapping[str, VectorLike] | None,
    size: int = GROUP_PROMPT,
) -> list[list[MemoryEntry]]:
    """With vectors: groups of near neighbours packed into prompts of GROUP_PROMPT entries
    (entries without a vector yet go in category order after them). Without: category order
    in chunks of CHUNK. Each project's memories (and the global ones) apart: a prompt never
    shows two projects' memories, so no merge can join them (docs/projects.md)."""
    by_project: dict[str, list[MemoryEntry]] = defaultdict(list)
    for entry in entries:
        by_project[project_key(entry)].append(entry)
    if len(by_project) > 1:
        return [p for own in by_project.values() for p in consolidation_prompts(own, vectors, size)]
    if vectors is None:
        ordered = sorted(entries, key=lambda e: (e.category or "", e.created_at))
        return [ordered[i : i + CHUNK] for i in range(0, len(ordered), CHUNK)]
    prompts = pack_prompts(neighbour_groups(entries, vectors), size)
    rest = sorted(
        (e for e in entries if len(vectors.get(e.id, ())) == 0),
        key=lambda e: (e.category or "", e.created_at),
    )
    return prompts + [rest[i : i + size] for i in range(0, len(rest), size)]


def consolidation_pass(
    snapshot: Snapshot,
    llm: LLM,
    data_dir: Path,
    feedback: Sequence[dict[str, Any]],
    now: datetime,
    vectors: Mapping[str, VectorLike] | None = None,
    cancel: threading.Event | None = None,
    prompt_size: int = GROUP_PROMPT,
) -> PassResult:
    """One prompt per group of candidates; a chunk whose answers stay bad is skipped with a
    note and the others still count. The pass fails only when no chunk got an answer."""
    result = PassResult("consolidation")
    system = directives.system_prompt(data_dir, "dream.md", directives.DREAM)
    notes = "\n".join(
        f"- {f.get('kind')}: {str(f.get('detail', ''))[:200]}" for f in feedback[-50:]
    )
    answered, failures = 0, []
    for shown in consolidation_prompts(live(snapshot), vectors, prompt_size):
        if len(shown) < 2:
            continue
        prompt = "Entries:\n" + "\n".join(_entry_line(i + 1, e) for i, e in enumerate(shown))
        if notes:
            prompt += "\n\nRecent feedback:\n" + notes
        ids = [e.id for e in shown]
        try:
            plan = ask_for(llm, system, prompt, ConsolidationPlan, ids, cancel, result.notes)
        except LLMCancelled:
            raise
        except LLMError as exc:
            failures.append(str(exc))
            result.notes.append(f"skipped a chunk of {len(shown)} entries: {exc}")
            continue
        answered += 1
        changes, rejected = apply_plan(plan, {e.id: e for e in shown}, now)
        result.changes += changes
        result.notes += rejected
    if failures and not answered:
        result.status, result.reason = "failed", failures[0]
    return result


def _save_ref(ref: str, saved: Mapping[int, MemoryEntry]) -> MemoryEntry | None:
    if not ref.startswith(SAVE_REF):
        return None
    try:
        return saved.get(int(ref[len(SAVE_REF) :]))
    except ValueError:
        return None


def apply_plan(
    plan: ConsolidationPlan, shown: Snapshot, now: datetime
) -> tuple[list[Change], list[str]]:
    """The host disposes: unknown ids and placeholders are ignored, merges that drop a fact or
    join distinct episodes are rejected, every source of a saved merge is archived, and a
    deletion needs a newer, related entry that supersedes it (and never hits high value)."""
    changes: list[Change] = []
    notes: list[str] = []
    used: set[str] = set()
    saved: dict[int, MemoryEntry] = {}
    for n, item in enumerate(plan.to_save, 1):
        entry, why = _planned(item, shown, used, now)
        if entry is None:
            notes.append(why)
            continue
        sources = [shown[i] for i in entry.metadata["merged_from"].split(",")]
        changes += _merge_changes(sources, entry, now)
        used.update(s.id for s in sources)
        saved[n] = entry
    for gone in plan.to_delete:
        change, why = _deletion(gone, shown, used, saved, now)
        if change is None:
            notes += [why] if why else []
        else:
            used.add(gone.id)
            changes.append(change)
    return changes, notes


def _planned(
    item: PlannedEntry, shown: Snapshot, used: set[str], now: datetime
) -> tuple[MemoryEntry | None, str]:
    ids = [i for i in dict.fromkeys(item.source_ids) if i in shown and i not in used]
    unknown = [i for i in item.source_ids if i not in shown]
    prefix = f"ignored unknown ids {unknown}; " if unknown else ""
    if placeholder(item.content):
        return None, f"{prefix}ignored a placeholder entry {item.content[:80]!r}"
    if not ids:
        return None, f"{prefix}ignored an entry with no known source: {item.content[:80]!r}"
    sources = [shown[i] for i in ids]
    if mixed_projects(sources):
        return None, f"{prefix}rejected merge of {ids}: they belong to different projects"
    lost = dropped_facts(sources, item.content)
    if lost:
        return None, f"{prefix}rejected merge of {ids}: it drops {', '.join(lost[:8])}"
    apart = distinct_episodes(sources)
    if apart:
        return None, f"{prefix}rejected merge of {ids}: distinct episodes ({apart[0]} / {apart[1]})"
    if unrelated_sources(sources):
        return None, f"{prefix}rejected merge of {ids}: the sources have too little in common"
    try:
        category = check_category(item.category) if item.category else sources[0].category
        if item.category and placeholder(item.category):
            category = sources[0].category
        tags = (
            check_tags([t for t in item.tags if not placeholder(t)])
            or tuple(t for s in sources for t in s.tags)[:32]
        )
        content = item.content.strip()
        if not content:
            raise InvalidInput("empty content")
    except InvalidInput as exc:
        return None, f"{prefix}rejected merge of {ids}: {exc}"
    return merged(sources, content, category, tags, item.importance, now), prefix.rstrip("; ")


def _deletion(
    item: Deletion, shown: Snapshot, used: set[str], saved: Mapping[int, MemoryEntry], now: datetime
) -> tuple[Change | None, str]:
    i, ref = item.id, item.superseded_by.strip()
    if i not in shown:
        return None, f"ignored unknown id {i!r} in toDelete"
    if i in used:
        return None, ""
    target = shown[i]
    successor = shown.get(ref) or _save_ref(ref, saved)
    if successor is None:
        return None, f"refused to delete [{i}]: it names no superseding entry ({ref!r})"
    if successor.id == i:
        return None, f"refused to delete [{i}]: it cannot supersede itself"
    if high_value(target):
        return None, f"kept high-value [{i}] the plan wanted to delete"
    if successor.created_at < target.created_at:
        return None, f"refused to delete [{i}]: [{successor.id}] is older, so it supersedes nothing"
    if unrelated_sources([target, successor]):
        return None, f"refused to delete [{i}]: [{successor.id}] is about something else"
    if mixed_projects([target, successor]):
        return None, f"refused to delete [{i}]: [{successor.id}] belongs to another project"
    after = replace(target, archived_at=now)
    return Change("archive", target, after, (successor.id,), "superseded"), ""


class AntiPattern(Answer):
    domain: str = Field(examples=["<one-word-domain>"])
    content: str = Field(examples=["Don't <what the agent did> for <task> — instead <what works>"])
    sessions: list[str] = Field(
        json_schema_extra={SHOWN_ID: True}, examples=[["<session id of a correction>"]]
    )


class AntiPatterns(Answer):
    anti_patterns: list[AntiPattern]


def _fresh_entry(
    content: str, category: str, tags: Iterable[str], metadata: dict[str, str], now: datetime
) -> MemoryEntry:
    return MemoryEntry(new_id(), content, category, tuple(tags), now, now, now, metadata=metadata)


def _usable_anti_pattern(content: str, domain: str, said: str, known: set[str]) -> bool:
    """A "don't …" rule of some length, in words the corrections used, not already stored."""
    return not (
        not re.match(r"(don'?t|do not)\b", content, re.I)
        or placeholder(content)
        or too_short(content, 20, 4)
        or not grounded(content, said, 1)
        or fold_text(content) in known
        or placeholder(domain)
    )


def anti_pattern_pass(
    snapshot: Snapshot,
    llm: LLM,
    data_dir: Path,
    corrections: Sequence[dict[str, Any]],
    now: datetime,
    cancel: threading.Event | None = None,
) -> PassResult:
    """Corrections (from the feedback log or mined from the conversation) become
    anti-patterns/{domain} entries; its own system prompt, `anti-patterns.md` replaces it."""
    result = PassResult("anti-patterns")
    if not corrections:
        result.status, result.reason = "skipped", "no Correction feedback"
        return result
    system = directives.system_prompt(data_dir, "anti-patterns.md", directives.ANTI_PATTERNS)
    shown = corrections[-100:]
    sessions = [str(c.get("session", "?")) for c in shown]
    said = "\n".join(str(c.get("detail", "")) for c in shown)
    prompt = "Corrections:\n" + "\n".join(
        f"- session={s}: {str(c.get('detail', ''))[:500]}"
        for s, c in zip(sessions, shown, strict=True)
    )
    answer = ask_for(llm, system, prompt, AntiPatterns, sorted(set(sessions)), cancel, result.notes)
    known = {fold_text(e.content) for e in live(snapshot)}
    for item in answer.anti_patterns:
        domain = re.sub(r"[^a-z0-9-]+", "-", item.domain.lower()).strip("-") or "general"
        content = item.content.strip()
        real = [s for s in dict.fromkeys(item.sessions) if s in sessions]
        if not real or not _usable_anti_pattern(content, domain, said, known):
            result.notes.append(f"ignored anti-pattern {content[:80]!r}")
            continue
        meta = {"source": "dream", "derived_from": ",".join(real)}
        entry = _fresh_entry(content, f"anti-patterns/{domain}", ["anti-pattern"], meta, now)
        result.changes.append(Change("anti-pattern", None, entry, tuple(real)))
        known.add(fold_text(content))
    return result


class Preference(Answer):
    content: str = Field(examples=["<the preference, in the user's own words>"])
    sentiment: Literal["strong", "mild", "casual"] = Field(examples=["mild"])
    occurrences: int = Field(ge=0, le=1000, examples=[2])
    sensitive: bool = Field(default=False, examples=[False])


class Preferences(Answer):
    preferences: list[Preference]


def preference_pass(
    snapshot: Snapshot,
    llm: LLM,
    data_dir: Path,
    conversation: Sequence[dict[str, Any]],
    now: datetime,
    cancel: threading.Event | None = None,
) -> PassResult:
    """`pref-dream.md` (or the built-in PREFERENCES) is the system prompt; the user prompt is
    the log alone. A preference must use the user's own words, be no placeholder, no task
    request and not too short, and meet its sentiment's occurrence threshold."""
    result = PassResult("preferences")
    if not conversation:
        result.status, result.reason = "skipped", "the conversation log is empty"
        return result
    system = directives.system_prompt(data_dir, "pref-dream.md", directives.PREFERENCES)
    lines = [
        f"[{_who(r)}] {r.get('role', '?')}: {str(r.get('content', ''))[:800]}" for r in conversation
    ]
    prompt = "Conversation log:\n" + "\n".join(lines)[-24_000:]
    answer = ask_for(llm, system, prompt, Preferences, None, cancel, result.notes)
    said = "\n".join(str(r.get("content", "")) for r in conversation if r.get("role") == "user")
    known = {fold_text(e.content) for e in live(snapshot)}
    for item in answer.preferences:
        content = item.content.strip()
        why = _preference_refusal(item, content, said, known)
        if why:
            result.notes.append(f"{why}: {content[:80]!r}")
            continue
        meta = {"source": "inferred"}
        if item.sensitive or SENSITIVE.search(content):
            meta["requires_user_permission"] = "true"
        entry = _fresh_entry(content, "user-preferences/inferred", ["inferred"], meta, now)
        result.changes.append(Change("preference", None, entry))
        known.add(fold_text(content))
    return result


def _who(record: Mapping[str, Any]) -> str:
    return str(record.get("session") or record.get("caller") or "?")


def _preference_refusal(item: Preference, content: str, said: str, known: set[str]) -> str:
    if placeholder(content):
        return "a placeholder"
    if too_short(content):
        return "too short"
    if task_request(content):
        return "a task request, not a preference"
    if not grounded(content, said):
        return "not in the user's words"
    if item.occurrences < PREFERENCE_THRESHOLD[item.sentiment]:
        return f"below the {item.sentiment} threshold"
    if fold_text(content) in known:
        return "already known"
    return ""


def scoring_pass(
    snapshot: Snapshot, feedback: Sequence[dict[str, Any]], recalls: Sequence[dict[str, Any]]
) -> PassResult:
    """helpful/harmful judgements move scores by EMA; the recall log sets last_used_at."""
    result = PassResult("scoring")
    current = dict(snapshot)
    for record in feedback:
        kind = str(record.get("kind", "")).lower()
        entry = current.get(str(record.get("memory_id", "")))
        if entry is None or kind not in ("helpful", "harmful"):
            continue
        current[entry.id] = replace(entry, score=ema(entry.score, kind == "helpful"))
    for record in recalls:
        try:
            when = datetime.fromisoformat(str(record["ts"]))
        except (KeyError, ValueError):
            continue
        for i in record.get("ids") or []:
            entry = current.get(str(i))
            if entry is not None and (entry.last_used_at is None or entry.last_used_at < when):
                current[entry.id] = replace(entry, last_used_at=when)
    for i, after in current.items():
        if after != snapshot[i]:
            kind = "score" if after.score != snapshot[i].score else "used"
            result.changes.append(Change(kind, snapshot[i], after))
    return result


def pruning_pass(snapshot: Snapshot, now: datetime) -> PassResult:
    result = PassResult("pruning")
    for entry in live(snapshot):
        if prunable(entry, now):
            note = f"score {entry.score:+.2f}, unused since " + (
                (entry.last_used_at or entry.created_at).date().isoformat()
            )
            result.changes.append(Change("prune", entry, replace(entry, archived_at=now), (), note))
    return result

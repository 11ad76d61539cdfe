"""The dream passes. Each takes the current snapshot of entries and returns the changes it
proposes; the cycle decides whether to apply them."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from dreamwell.dream import directives
from dreamwell.dream.llm import LLM, Answer, ask_for
from dreamwell.dream.report import Change, PassResult
from dreamwell.dream.rules import (
    DecayPolicy,
    decay,
    distinct_episodes,
    dropped_facts,
    high_value,
    merged,
    prunable,
    unrelated_sources,
)
from dreamwell.dream.rules import scored as ema
from dreamwell.stores import (
    InvalidInput,
    MemoryEntry,
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
    groups: dict[tuple[str, str], list[MemoryEntry]] = defaultdict(list)
    for entry in live(snapshot):
        groups[(entry.category or "", fold_text(entry.content) or entry.content)].append(entry)
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda e: (e.created_at, e.id))
        tags = [t for e in group for t in e.tags][:32]
        entry = merged(group, group[0].content, group[0].category, tags, None, now)
        result.changes += _merge_changes(group, entry, now)
    return result


class PlannedEntry(Answer):
    content: str
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    source_ids: list[str] = Field(default_factory=list)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)


class ConsolidationPlan(Answer):
    to_delete: list[str] = Field(default_factory=list)
    to_save: list[PlannedEntry] = Field(default_factory=list)


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


def consolidation_pass(
    snapshot: Snapshot, llm: LLM, data_dir: Path, feedback: Sequence[dict[str, Any]], now: datetime
) -> PassResult:
    result = PassResult("consolidation")
    system = directives.system_prompt(data_dir, "dream.md", directives.DREAM)
    notes = "\n".join(
        f"- {f.get('kind')}: {str(f.get('detail', ''))[:200]}" for f in feedback[-50:]
    )
    entries = sorted(live(snapshot), key=lambda e: (e.category or "", e.created_at))
    for start in range(0, len(entries), CHUNK):
        shown = entries[start : start + CHUNK]
        if len(shown) < 2:
            continue
        prompt = "Entries:\n" + "\n".join(_entry_line(i + 1, e) for i, e in enumerate(shown))
        if notes:
            prompt += "\n\nRecent feedback:\n" + notes
        plan = ask_for(llm, system, prompt, ConsolidationPlan)  # LLMError: the pass fails
        changes, rejected = apply_plan(plan, {e.id: e for e in shown}, now)
        result.changes += changes
        result.notes += rejected
    return result


def apply_plan(
    plan: ConsolidationPlan, shown: Snapshot, now: datetime
) -> tuple[list[Change], list[str]]:
    """The host disposes: unknown ids are ignored, merges that drop a fact are rejected, high
    value entries are never deleted outright, every source of a saved merge is archived."""
    changes: list[Change] = []
    notes: list[str] = []
    used: set[str] = set()
    for item in plan.to_save:
        ids = [i for i in dict.fromkeys(item.source_ids) if i in shown and i not in used]
        unknown = [i for i in item.source_ids if i not in shown]
        if unknown:
            notes.append(f"ignored unknown ids {unknown}")
        if not ids:
            notes.append(f"ignored an entry with no known source: {item.content[:80]!r}")
            continue
        sources = [shown[i] for i in ids]
        lost = dropped_facts(sources, item.content)
        if lost:
            notes.append(f"rejected merge of {ids}: it drops {', '.join(lost[:8])}")
            continue
        apart = distinct_episodes(sources)
        if apart:
            notes.append(f"rejected merge of {ids}: distinct episodes ({apart[0]} / {apart[1]})")
            continue
        if unrelated_sources(sources):
            notes.append(f"rejected merge of {ids}: the sources have too little in common")
            continue
        try:
            category = check_category(item.category) if item.category else sources[0].category
            tags = check_tags(item.tags) or tuple(t for s in sources for t in s.tags)[:32]
            content = item.content.strip()
            if not content:
                raise InvalidInput("empty content")
        except InvalidInput as exc:
            notes.append(f"rejected merge of {ids}: {exc}")
            continue
        entry = merged(sources, content, category, tags, item.importance, now)
        changes += _merge_changes(sources, entry, now)
        used.update(ids)
    for i in dict.fromkeys(plan.to_delete):
        if i not in shown:
            notes.append(f"ignored unknown id {i!r} in toDelete")
        elif i not in used and high_value(shown[i]):
            notes.append(f"kept high-value [{i}] the plan wanted to delete")
        elif i not in used:
            used.add(i)
            changes.append(
                Change(
                    "archive",
                    shown[i],
                    replace(shown[i], archived_at=now),
                    (),
                    "deleted by the consolidation plan",
                )
            )
    return changes, notes


class AntiPattern(Answer):
    domain: str
    content: str
    sessions: list[str] = Field(default_factory=list)


class AntiPatterns(Answer):
    anti_patterns: list[AntiPattern] = Field(default_factory=list)


def _fresh_entry(
    content: str, category: str, tags: Iterable[str], metadata: dict[str, str], now: datetime
) -> MemoryEntry:
    return MemoryEntry(new_id(), content, category, tuple(tags), now, now, now, metadata=metadata)


def anti_pattern_pass(
    snapshot: Snapshot,
    llm: LLM,
    data_dir: Path,
    corrections: Sequence[dict[str, Any]],
    now: datetime,
) -> PassResult:
    result = PassResult("anti-patterns")
    if not corrections:
        result.status, result.reason = "skipped", "no Correction feedback"
        return result
    system = directives.system_prompt(data_dir, "dream.md", directives.DREAM)
    prompt = (
        directives.ANTI_PATTERNS
        + "\nCorrections:\n"
        + "\n".join(
            f"- session={c.get('session', '?')}: {str(c.get('detail', ''))[:500]}"
            for c in corrections[-100:]
        )
    )
    answer = ask_for(llm, system, prompt, AntiPatterns)
    known = {fold_text(e.content) for e in live(snapshot)}
    for item in answer.anti_patterns:
        domain = re.sub(r"[^a-z0-9-]+", "-", item.domain.lower()).strip("-") or "general"
        content = item.content.strip()
        if not content.lower().startswith("don't") or fold_text(content) in known:
            result.notes.append(f"ignored anti-pattern {content[:80]!r}")
            continue
        sessions = [s for s in item.sessions if any(c.get("session") == s for c in corrections)]
        meta = {"source": "dream", "derived_from": ",".join(sessions)}
        entry = _fresh_entry(content, f"anti-patterns/{domain}", ["anti-pattern"], meta, now)
        result.changes.append(Change("anti-pattern", None, entry, tuple(sessions)))
        known.add(fold_text(content))
    return result


class Preference(Answer):
    content: str
    sentiment: str = "casual"
    occurrences: int = Field(default=1, ge=0)
    sensitive: bool = False


class Preferences(Answer):
    preferences: list[Preference] = Field(default_factory=list)


def preference_pass(
    snapshot: Snapshot,
    llm: LLM,
    data_dir: Path,
    conversation: Sequence[dict[str, Any]],
    now: datetime,
) -> PassResult:
    result = PassResult("preferences")
    if not conversation:
        result.status, result.reason = "skipped", "the conversation log is empty"
        return result
    system = directives.system_prompt(data_dir, "pref-dream.md", directives.PREFERENCES)
    lines = [
        f"[{r.get('session', '?')}] {r.get('role', '?')}: {str(r.get('content', ''))[:800]}"
        for r in conversation
    ]
    prompt = directives.PREFERENCES + "\nConversation log:\n" + "\n".join(lines)[-24_000:]
    answer = ask_for(llm, system, prompt, Preferences)
    known = {fold_text(e.content) for e in live(snapshot)}
    for item in answer.preferences:
        needed = PREFERENCE_THRESHOLD.get(item.sentiment.lower(), 3)
        content = item.content.strip()
        if item.occurrences < needed or not content or fold_text(content) in known:
            result.notes.append(f"below threshold or known: {content[:80]!r}")
            continue
        meta = {"source": "inferred"}
        if item.sensitive or SENSITIVE.search(content):
            meta["requires_user_permission"] = "true"
        entry = _fresh_entry(content, "user-preferences/inferred", ["inferred"], meta, now)
        result.changes.append(Change("preference", None, entry))
        known.add(fold_text(content))
    return result


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

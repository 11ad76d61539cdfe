"""What feeds the dream over MCP, as pure functions the cycle calls: Correction signals mined
from the recorded conversation, helpful/harmful judgements from the recall log and the user
turns that followed (the LLM as judge), and the enrichment of one saved memory into atomic
facts with a coverage check before the original may be archived."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field

from dreamwell.dream import directives
from dreamwell.dream.answers import SHOWN_ID, Answer, ask_for
from dreamwell.dream.llm import LLM, LLMCancelled, LLMError
from dreamwell.dream.rules import dropped_facts, placeholder, too_short, words
from dreamwell.stores import (
    PROJECT,
    PROJECT_NAME,
    InvalidInput,
    MemoryEntry,
    check_category,
    check_tags,
    new_id,
)

# A user turn that corrects the agent: "no, don't…", "I told you…", "stop …", "that's wrong".
CORRECTION = re.compile(
    r"^\s*(?:no\b|nope\b|wrong\b|stop\b|don'?t\b|do not\b|never\b|not like that\b|"
    r"that'?s (?:not|wrong)\b|why did you\b)"
    r"|\bI (?:already )?(?:told|asked|said to) you\b|\bI said\b|\bhow many times\b"
    r"|\bplease (?:don'?t|stop|never)\b|\bstop (?:doing|using|adding|writing)\b"
    r"|\bnot what I (?:asked|wanted|said)\b",
    re.I,
)
JUDGE_WINDOW = timedelta(minutes=30)
JUDGE_TURNS = 3
JUDGE_RECALLS = 20  # judged per cycle: the judge costs one LLM call per recall


def _who(record: Mapping[str, Any]) -> str:
    return str(record.get("caller") or record.get("session") or "?")


def _when(record: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(record["ts"]))
    except (KeyError, ValueError):
        return None


def corrects(record: Mapping[str, Any]) -> bool:
    """A user turn that corrects the agent (the anti-pattern pass reads it)."""
    text = str(record.get("content", "")).strip()
    return str(record.get("role", "user")) == "user" and bool(CORRECTION.search(text))


def mine_corrections(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """User turns that correct the agent, shaped like feedback-log corrections:
    {session, kind: "Correction", detail, ts?, source: "conversation"}."""
    out: list[dict[str, Any]] = []
    for record in conversation:
        text = str(record.get("content", "")).strip()
        if not corrects(record):
            continue
        item = {"session": _who(record), "kind": "Correction", "detail": text[:500]}
        if record.get("ts"):
            item["ts"] = str(record["ts"])
        out.append(item | {"source": "conversation"})
    return out


class Judgement(Answer):
    id: str = Field(json_schema_extra={SHOWN_ID: True}, examples=["<id of a shown memory>"])
    verdict: Literal["helpful", "harmful", "unclear"] = Field(examples=["unclear"])
    reason: str = Field(examples=["<what the user said that shows it>"])


class Judgements(Answer):
    judgements: list[Judgement]


def _followups(recall: Mapping[str, Any], conversation: Sequence[Mapping[str, Any]]) -> list[str]:
    start = _when(recall)
    if start is None:
        return []
    who, end = _who(recall), start + JUDGE_WINDOW
    turns = []
    for record in conversation:
        ts = _when(record)
        if ts is None or _who(record) != who or record.get("role", "user") != "user":
            continue
        if start < ts <= end:
            turns.append((ts, str(record.get("content", ""))[:600]))
    return [text for _, text in sorted(turns)[:JUDGE_TURNS]]


def judge_recalls(
    llm: LLM | None,
    snapshot: Mapping[str, MemoryEntry],
    recalls: Sequence[Mapping[str, Any]],
    conversation: Sequence[Mapping[str, Any]],
    system: str = directives.JUDGE,
    cancel: threading.Event | None = None,
    notes: list[str] | None = None,
    read: list[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """For each recall (ids a caller was shown, ts, caller) followed by that caller's user
    turns, ask the LLM whether each shown memory helped or harmed. Returns feedback records
    {kind: helpful|harmful, memory_id, session, detail, source: "judge"} for scoring_pass;
    "unclear" gives nothing, and without an LLM there is nothing. `read` gets the recalls
    it is done with (judged, or with nothing to judge); the others wait for a later cycle."""
    if llm is None:
        return []
    out: list[dict[str, Any]] = []
    read = read if read is not None else []
    judged = 0
    for recall in recalls:
        shown = [snapshot[str(i)] for i in recall.get("ids") or [] if str(i) in snapshot]
        after = _followups(recall, conversation)
        if not shown or not after:
            read.append(recall)
            continue
        if judged >= JUDGE_RECALLS:
            continue
        judged += 1
        ids = [e.id for e in shown]
        try:
            answer = ask_for(
                llm, system, _judge_prompt(shown, after), Judgements, ids, cancel, notes
            )
        except LLMCancelled:
            raise
        except LLMError as exc:
            if notes is not None:
                notes.append(f"judge skipped a recall: {exc}")
            continue
        out += _verdicts(answer, ids, recall)
        read.append(recall)
    return out


class Fact(Answer):
    content: str = Field(examples=["<one atomic fact, every name, number and date kept>"])
    category: str = Field(examples=["<category/subcategory>"])
    tags: list[str] = Field(examples=[["<tag>"]])


class Facts(Answer):
    facts: list[Fact]


def _judge_prompt(shown: Sequence[MemoryEntry], after: Sequence[str]) -> str:
    return (
        "Memories shown to the agent:\n"
        + "\n".join(f"- id={e.id}: {e.content[:400]}" for e in shown)
        + "\n\nWhat the user said next:\n"
        + "\n".join(f"- {t}" for t in after)
    )


def _verdicts(
    answer: Judgements, ids: Sequence[str], recall: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The judge's clear verdicts on memories it was shown, as feedback records."""
    return [
        {
            "kind": item.verdict,
            "memory_id": item.id,
            "session": _who(recall),
            "detail": item.reason[:300],
            "source": "judge",
        }
        for item in answer.judgements
        if item.verdict != "unclear" and item.id in ids and not placeholder(item.reason)
    ]


def enrich(
    entry: MemoryEntry,
    llm: LLM,
    rules_text: str,
    now: datetime,
    system: str = directives.ENRICH,
    cancel: threading.Event | None = None,
    notes: list[str] | None = None,
) -> list[MemoryEntry]:
    """Split a long or vague saved memory into atomic facts, each with a category and tags and
    metadata derived_from=<id>. A fact holding a name, number or date the original lacks is
    dropped (invented); an answer that just repeats the original gives []. Raises LLMError."""
    prompt = f"{rules_text.strip()}\n\nThe memory (id={entry.id}):\n{entry.content}"
    answer = ask_for(llm, system, prompt, Facts, None, cancel, notes)
    out: list[MemoryEntry] = []
    seen: set[str] = set()
    for fact in answer.facts:
        content = fact.content.strip()
        invented = dropped_facts([_as_entry(content, entry)], entry.content)
        if placeholder(content) or too_short(content, 8, 2) or invented or content in seen:
            if notes is not None:
                notes.append(
                    f"dropped fact {content[:80]!r}" + (f": {invented}" if invented else "")
                )
            continue
        seen.add(content)
        out.append(_fact_entry(fact, content, entry, now))
    if len(out) == 1 and out[0].content == entry.content.strip():
        return []
    return out


def _fact_entry(fact: Fact, content: str, entry: MemoryEntry, now: datetime) -> MemoryEntry:
    """A new memory for one fact of `entry`: its category and tags where they are valid (else
    the original's), metadata derived_from=<id>."""
    try:
        category = check_category(fact.category) if not placeholder(fact.category) else None
    except InvalidInput:
        category = None
    try:
        tags = check_tags([t for t in fact.tags if not placeholder(t)])
    except InvalidInput:
        tags = ()
    return MemoryEntry(
        new_id(),
        content,
        category or entry.category,
        tags or entry.tags,
        now,
        now,
        now,
        importance=entry.importance,
        metadata={"derived_from": entry.id, "source": "enrich", **_scope_of(entry)},
    )


def _scope_of(entry: MemoryEntry) -> dict[str, str]:
    """The project keys of `entry`'s metadata: what is derived from it stays in its project."""
    return {k: v for k in (PROJECT, PROJECT_NAME) if (v := entry.metadata.get(k))}


def _as_entry(content: str, like: MemoryEntry) -> MemoryEntry:
    at = like.created_at
    return MemoryEntry(like.id, content, like.category, (), at, at, at)


def covered(original: MemoryEntry, derived: Sequence[MemoryEntry], share: float = 0.8) -> bool:
    """True when the derived entries carry every fact of the original (names, numbers, dates,
    months) and most of its content words, so the original may be archived."""
    if not derived:
        return False
    text = "\n".join(d.content for d in derived)
    if dropped_facts([original], text):
        return False
    mine = words(original.content)
    return not mine or len(mine & words(text)) >= share * len(mine)

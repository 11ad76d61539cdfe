"""The host's own rules, as pure functions: decay, merge arithmetic, fact preservation,
feedback scoring and pruning thresholds (docs/dreaming.md, seeds 001 and 003)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from dreamwell.stores import MONTHS, PROJECT, PROJECT_NAME, MemoryEntry, is_global, new_id

SUBJECT_TIME = "subjectTime"
SUBJECT_START = "subjectTimeStart"
SUBJECT_END = "subjectTimeEnd"
HIGH_VALUE_IMPORTANCE = 0.8
HIGH_VALUE_REINFORCEMENT = 5


@dataclass(frozen=True)
class DecayPolicy:
    grace: timedelta = timedelta(days=30)
    half_life: timedelta = timedelta(days=45)
    floor: float = 0.10


def decay(entry: MemoryEntry, now: datetime, policy: DecayPolicy) -> MemoryEntry:
    """importance · 0.5^(eligible / half-life), never below the floor. `eligible` runs from the
    later of the entry's own decay clock and the end of its grace window, so any schedule of
    runs gives the same curve. Unchanged entries come back as they are."""
    if policy.half_life <= timedelta(0) or entry.importance <= policy.floor:
        return entry
    grace_end = entry.last_seen_at + policy.grace
    start = max(grace_end, entry.decayed_at) if entry.decayed_at else grace_end
    if now <= start:
        return entry
    factor = 0.5 ** ((now - start) / policy.half_life)
    return replace(entry, importance=max(policy.floor, entry.importance * factor), decayed_at=now)


def high_value(entry: MemoryEntry) -> bool:
    return (
        entry.importance >= HIGH_VALUE_IMPORTANCE
        or entry.reinforcement_count >= HIGH_VALUE_REINFORCEMENT
    )


def merge_subject_time(sources: Sequence[MemoryEntry]) -> dict[str, str]:
    """Longest (most specific) subjectTime, earliest start, latest end."""
    out: dict[str, str] = {}
    points = [s.metadata[SUBJECT_TIME] for s in sources if s.metadata.get(SUBJECT_TIME)]
    if points:
        out[SUBJECT_TIME] = max(points, key=lambda p: (len(p), p))
    starts = [s.metadata[SUBJECT_START] for s in sources if s.metadata.get(SUBJECT_START)]
    if starts:
        out[SUBJECT_START] = min(starts)
    ends = [s.metadata[SUBJECT_END] for s in sources if s.metadata.get(SUBJECT_END)]
    if ends:
        out[SUBJECT_END] = max(ends)
    return out


def project_key(entry: MemoryEntry) -> str:
    """The project an entry belongs to ('' for a global one): the dream never merges across."""
    return entry.metadata.get(PROJECT) or ""


def mixed_projects(entries: Sequence[MemoryEntry]) -> bool:
    return len({project_key(e) for e in entries}) > 1


def merged(
    sources: Sequence[MemoryEntry],
    content: str,
    category: str | None,
    tags: Iterable[str],
    importance: float | None,
    now: datetime,
) -> MemoryEntry:
    """The entry that replaces `sources`: created = min, last seen = max, reinforcement = sum,
    importance = the given one or the sources' max, subject time merged, provenance kept."""
    if not sources:
        raise ValueError("a merge needs at least one source")
    metadata = merge_subject_time(sources)
    metadata["merged_from"] = ",".join(s.id for s in sources)
    metadata["source"] = "dream"
    owner = sources[0].metadata.get(PROJECT)
    if owner and not is_global(category) and all(s.metadata.get(PROJECT) == owner for s in sources):
        metadata[PROJECT] = owner  # a project's memories merge into that project's memory
        if name := sources[0].metadata.get(PROJECT_NAME):
            metadata[PROJECT_NAME] = name
    return MemoryEntry(
        id=new_id(),
        content=content,
        category=category,
        tags=tuple(dict.fromkeys(tags)),
        created_at=min(s.created_at for s in sources),
        updated_at=now,
        last_seen_at=max(s.last_seen_at for s in sources),
        reinforcement_count=sum(s.reinforcement_count for s in sources),
        importance=max(s.importance for s in sources) if importance is None else importance,
        score=max(s.score for s in sources),
        last_used_at=max((s.last_used_at for s in sources if s.last_used_at), default=None),
        metadata=metadata,
    )


_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
# MONTHS leaves "may" out: as a verb it is no fact (a capitalised "May" mid-sentence still
# counts)
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)


# Capitalised at a sentence start, these are ordinary words; any other capitalised word is
# taken for a name (conservative: a merge that drops it is rejected).
_STARTERS = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "we",
        "you",
        "he",
        "she",
        "it",
        "they",
        "me",
        "my",
        "our",
        "your",
        "his",
        "her",
        "its",
        "their",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "how",
        "if",
        "then",
        "so",
        "but",
        "and",
        "or",
        "nor",
        "yet",
        "also",
        "as",
        "at",
        "by",
        "for",
        "from",
        "in",
        "into",
        "of",
        "on",
        "onto",
        "to",
        "with",
        "without",
        "about",
        "after",
        "before",
        "during",
        "since",
        "until",
        "while",
        "because",
        "although",
        "though",
        "once",
        "every",
        "each",
        "some",
        "any",
        "all",
        "most",
        "many",
        "much",
        "more",
        "less",
        "no",
        "not",
        "none",
        "one",
        "both",
        "either",
        "neither",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "user",
        "users",
        "please",
        "note",
        "today",
        "yesterday",
        "tomorrow",
        "always",
        "never",
        "often",
        "usually",
        "sometimes",
        "maybe",
        "yes",
        "ok",
        "okay",
        "hey",
        "hi",
        "hello",
        "thanks",
        "just",
        "only",
        "still",
        "even",
        "very",
        "really",
    ]
)


def key_facts(text: str) -> set[str]:
    """Numbers, dates, month names and proper nouns — what a merge must keep."""
    facts = {m.group(0) for m in _NUMBER.finditer(text)}
    words = list(_WORD.finditer(text))
    for i, match in enumerate(words):
        word = match.group(0)
        before = text[: match.start()].rstrip()
        sentence_start = i == 0 or before.endswith((".", "!", "?", ":", "\n"))
        if word.lower() in MONTHS:
            facts.add(word.lower())
        elif word[0].isupper() and not (sentence_start and word.lower() in _STARTERS):
            facts.add(word)
    return facts


def dropped_facts(sources: Sequence[MemoryEntry], text: str) -> list[str]:
    """Facts of the sources that `text` no longer carries (case-insensitively)."""
    have = text.lower()
    lost = {f for s in sources for f in key_facts(s.content) if f.lower() not in have}
    return sorted(lost)


def distinct_episodes(sources: Sequence[MemoryEntry]) -> tuple[str, str] | None:
    """Two sources that each carry a fact the other lacks (another date, number, person or
    place) describe different things: (a fact of one, a fact of the other), else None."""
    for i, a in enumerate(sources):
        for b in sources[i + 1 :]:
            only_a = [f for f in key_facts(a.content) if f.lower() not in b.content.lower()]
            only_b = [f for f in key_facts(b.content) if f.lower() not in a.content.lower()]
            if only_a and only_b:
                return sorted(only_a)[0], sorted(only_b)[0]
    return None


_CONTENT_WORD = re.compile(r"\w{3,}", re.UNICODE)


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' words of three letters or more."""
    wa = {w.lower() for w in _CONTENT_WORD.findall(a)}
    wb = {w.lower() for w in _CONTENT_WORD.findall(b)}
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def unrelated_sources(sources: Sequence[MemoryEntry], floor: float = 0.2) -> bool:
    """True when some source shares too few words with every other source to be the same fact."""
    if len(sources) < 2:
        return False
    return any(
        max(overlap(a.content, b.content) for b in sources if b is not a) < floor for a in sources
    )


EMA_ALPHA = 0.3
HELPFUL_TARGET = 2.0
HARMFUL_TARGET = -3.0


def scored(score: float, helpful: bool) -> float:
    """One feedback judgement moves the score by EMA towards +2 (helpful) or −3 (harmful)."""
    target = HELPFUL_TARGET if helpful else HARMFUL_TARGET
    return score + EMA_ALPHA * (target - score)


# Seed 003 prunes at −8 / −5 / −3, which an EMA bounded by −3 can never reach. From 0, harmful
# judgements in a row give −0.90, −1.53, −1.97, −2.28, −2.50: five prune at once, three after
# 90 unused days, two after 180 (a helpful judgement in between pulls the score back up).
PRUNE_RULES = ((-2.4, timedelta(0)), (-1.9, timedelta(days=90)), (-1.5, timedelta(days=180)))


def prunable(entry: MemoryEntry, now: datetime) -> bool:
    if not entry.live or high_value(entry):
        return False
    unused = now - (entry.last_used_at or entry.created_at)
    return any(entry.score <= limit and unused >= stale for limit, stale in PRUNE_RULES)


# --- guards on what a model proposes -------------------------------------------------------

_PLACEHOLDERS = frozenset(
    {
        "",
        "id",
        "ids",
        "content",
        "string",
        "text",
        "none",
        "null",
        "n/a",
        "todo",
        "example",
        "preference",
        "category",
        "tag",
        "domain",
        "strong|mild|casual",
        "helpful|harmful|unclear",
    }
)


def placeholder(text: str) -> bool:
    """Text copied from a prompt's example or field names rather than written."""
    t = text.strip().strip("\"'`").strip().lower()
    if t in _PLACEHOLDERS or not re.search(r"\w", t):
        return True
    return bool(re.search(r"<[^<>]{2,}>|\.\.\.|…|\|", t)) and len(t) < 200


_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "have",
        "what",
        "when",
        "your",
        "you",
        "are",
        "was",
        "were",
        "will",
        "would",
        "should",
        "could",
        "about",
        "into",
        "them",
        "they",
        "their",
        "there",
        "then",
        "than",
        "also",
        "just",
        "like",
        "likes",
        "prefers",
        "prefer",
        "wants",
        "want",
        "user",
        "users",
        "always",
        "never",
        "every",
        "more",
        "less",
        "very",
        "much",
        "some",
        "only",
        "does",
        "doesn",
        "don't",
        "dont",
        "not",
        "please",
        "thanks",
        "answer",
        "answers",
        "reply",
        "replies",
    ]
)
_TASK = re.compile(
    r"^\s*(?:please\s+|can you\s+|could you\s+|would you\s+|will you\s+|let'?s\s+)?"
    r"(?:write|create|fix|summari[sz]e|translate|send|book|find|make|generate|build|draft|"
    r"show|list|explain|tell|give|add|remove|delete|update|run|help|search|check|schedule|"
    r"remind|buy|order|plan|refactor|implement)\b",
    re.I,
)


def words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[^\W\d_]{4,}", text) if w.lower() not in _STOP}


def grounded(text: str, source: str, need: int = 2) -> bool:
    """At least `need` of the text's content words (or all, when it has fewer) occur in
    `source`: the model used the user's own words rather than inventing."""
    mine = words(text)
    common = mine & words(source)
    return bool(mine) and len(common) >= min(need, len(mine))


def task_request(text: str) -> bool:
    """A request to do something now ("write me…", "can you…?"), not a durable preference."""
    return bool(_TASK.match(text)) or text.strip().endswith("?")


def too_short(text: str, chars: int = 12, min_words: int = 3) -> bool:
    return len(text.strip()) < chars or len(text.split()) < min_words

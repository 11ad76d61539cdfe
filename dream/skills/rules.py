"""The host's arithmetic and guards for the skill passes (docs/skills.md), pure functions: sessions
from the conversation log and their recurring terms (gap detection's signal), sparse marks
and prefix clusters (consolidation's input), the facts of a skill's body — commands, paths,
URLs, numbers — and which of them an answer lost (the body guard)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from dreamwell.stores import ENGLISH_STOPWORDS, Skill, skill_md_parts

SPARSE_CHARS = 200
SPARSE_AGE = timedelta(days=7)
MIN_SESSIONS = 2  # a new skill needs this many sessions asking for that kind of thing
TOP_TERMS = 30
_TERM = re.compile(r"[a-z0-9][a-z0-9_-]{2,}")
_FILLER = frozenset(
    [
        "please",
        "can",
        "could",
        "would",
        "want",
        "need",
        "help",
        "like",
        "just",
        "make",
        "get",
        "let",
        "thanks",
        "hey",
        "hello",
        "again",
        "also",
        "one",
        "way",
        "use",
        "using",
        "today",
        "now",
        "new",
        "know",
        "think",
        "really",
    ]
)


@dataclass
class Session:
    id: str
    turns: list[str] = field(default_factory=list)  # the user's turns, oldest first
    projects: set[str] = field(default_factory=set)  # the keys of the projects it ran in

    @property
    def first(self) -> str:
        return self.turns[0] if self.turns else ""


def sessions_of(conversation: Sequence[Mapping[str, Any]]) -> list[Session]:
    """User turns grouped by session (in order of each session's first turn)."""
    out: dict[str, Session] = {}
    timed = sorted(enumerate(conversation), key=lambda p: (str(p[1].get("ts", "")), p[0]))
    for _, record in timed:
        if str(record.get("role", "user")) != "user":
            continue
        text = str(record.get("content", "")).strip()
        who = str(record.get("session") or record.get("caller") or "")
        if text and who:
            session = out.setdefault(who, Session(who))
            session.turns.append(text)
            session.projects.add(str(record.get("project") or ""))
    return list(out.values())


def sessions_project(sessions: Sequence[Session]) -> str | None:
    """The project all `sessions` ran in, when it is one (a skill learned from them alone is
    that project's); None when they ran in several, or outside any."""
    found = {p for s in sessions for p in s.projects}
    return found.pop() if len(found) == 1 and "" not in found else None


def terms(text: str) -> set[str]:
    """Content terms of a message: lowercase words of 3+ characters, no stop-words."""
    found = set(_TERM.findall(text.lower()))
    return {t for t in found if t not in ENGLISH_STOPWORDS and t not in _FILLER}


def recurring_terms(sessions: Sequence[Session]) -> list[tuple[str, int]]:
    """Terms of the sessions' first user messages found in >= MIN_SESSIONS sessions, with
    their session counts, most first (the signal handed to the LLM)."""
    counts: Counter[str] = Counter()
    for session in sessions:
        counts.update(terms(session.first))
    found = [(t, n) for t, n in counts.items() if n >= MIN_SESSIONS]
    return sorted(found, key=lambda p: (-p[1], p[0]))[:TOP_TERMS]


def sparse(skill: Skill, now: datetime) -> bool:
    """< 200 characters of body and created more than 7 days ago."""
    try:
        created = datetime.fromisoformat(skill.created_at)
    except ValueError:
        return False
    return len(skill.body.strip()) < SPARSE_CHARS and now - created > SPARSE_AGE


def prefix_clusters(names: Iterable[str]) -> dict[str, list[str]]:
    """Skills grouped by the first part of their name (`deploy-web`, `deploy-api` →
    `deploy`), clusters of two or more only."""
    groups: defaultdict[str, list[str]] = defaultdict(list)
    for name in sorted(names):
        groups[name.split("-")[0]].append(name)
    return {p: ns for p, ns in groups.items() if len(ns) >= 2}


_URL = re.compile(r"https?://[^\s)>\]`'\"]+")
_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@+-]+)+/?|\b[\w.-]+(?:/[\w.@+-]+)+/?")
_FILE = re.compile(r"\b[\w-]+\.(?:sh|py|md|json|ya?ml|toml|txt|cfg|ini|js|ts|sql|lock|env)\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)*(?![\w])")
_LIST_MARK = re.compile(r"^[ \t]*\d+[.)][ \t]+", re.M)  # "1. step": numbering, not a fact


def _squash(text: str) -> str:
    return " ".join(text.split()).lower()


def body_facts(body: str) -> set[str]:
    """What a rewrite of a skill's body must keep: commands (inline code, the lines of code
    blocks), paths, file names, URLs and numbers."""
    facts: set[str] = set()
    for block in _FENCE.findall(body):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ").strip()
            if line and not line.startswith("#"):
                facts.add(line)
    prose = _LIST_MARK.sub("", _FENCE.sub(" ", body))
    facts.update(c.strip() for c in _CODE.findall(prose) if c.strip())
    for pattern in (_URL, _PATH, _FILE, _NUMBER):
        facts.update(m.group(0).rstrip(".,;:") for m in pattern.finditer(prose))
    return {f for f in facts if f}


def lost_facts(old_body: str, new_text: str, named_wrong: str = "") -> list[str]:
    """Facts of `old_body` that `new_text` no longer carries (whitespace and case folded),
    leaving out those the failure context `named_wrong` mentions (it may call them wrong)."""
    have, wrong = _squash(new_text), _squash(named_wrong)
    lost = [f for f in body_facts(old_body) if _squash(f) not in have]
    return sorted(f for f in lost if not (wrong and _squash(f) in wrong))


def covers(sessions: Sequence[Session], text: str) -> bool:
    """True when the cited sessions share a content term (5-letter stems) with each other
    and with `text` (a skill's name and description): they asked for that kind of thing."""
    mine = {t[:5] for t in terms(text.replace("-", " ")) | terms(text)}
    common = set(mine)
    for session in sessions:
        common &= {t[:5] for t in terms(" ".join(session.turns))}
    return bool(common)


def invented(body: str, source: str) -> list[str]:
    """URLs, paths and numbers of a new skill's body that the user never said."""
    have, body = _squash(source), _LIST_MARK.sub("", body)
    found = {m.group(0).rstrip(".,;:") for p in (_URL, _PATH, _NUMBER) for m in p.finditer(body)}
    return sorted(f for f in found if f and _squash(f) not in have)


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def unrelated(texts: Sequence[str], floor: float = 0.12) -> bool:
    """True when some skill shares too few terms with every other one to be the same
    procedure (each text: a skill's name, description and body)."""
    if len(texts) < 2:
        return False
    sets = [terms(t.replace("-", " ")) | terms(t) for t in texts]
    return any(
        max(_overlap(a, b) for j, b in enumerate(sets) if j != i) < floor
        for i, a in enumerate(sets)
    )


_EXAMPLE = re.compile(r"^<[^<>]*>$|<(?:the|what|name of|id of|a shown|lowercase)\b", re.I)


def copied(text: str) -> bool:
    """A name, description or body copied from the answer's example rather than written (a
    body may hold its own `<version>`-style slots, so only the examples' phrasing counts)."""
    t = text.strip().strip("\"'`").strip()
    return (
        not re.search(r"\w", t)
        or t.lower() in ("none", "null", "n/a", "todo", "...")
        or bool(_EXAMPLE.search(t))
    )


def slug(name: str) -> str:
    """A proposed skill name as a valid one: lowercase, hyphens between words ("Cut Release"
    → "cut-release"); validation still refuses what this cannot mend."""
    return re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")[:64].strip("-")


# ---- SKILL.md as the passes write it ----------------------------------------------------------
def skill_md(name: str, description: str, body: str) -> bytes:
    """A new skill's SKILL.md: name and description (a YAML double-quoted string) and body."""
    head = f"---\nname: {name}\ndescription: {json.dumps(description.strip())}\n---\n\n"
    return (head + body.strip() + "\n").encode("utf-8")


def rewritten_md(base: Skill, description: str, body: str) -> bytes:
    """`base`'s SKILL.md with a new body, and a new description where it is a one-line
    `description:` key (other front matter kept as it was)."""
    opening, lines, closing, _ = skill_md_parts(base.skill_md, base.name)
    out = []
    for i, line in enumerate(lines):
        single = i + 1 == len(lines) or not lines[i + 1][:1].isspace()
        if line.startswith("description:") and single and description.strip():
            line = f"description: {json.dumps(description.strip(), ensure_ascii=False)}\n"
        out.append(line)
    return (opening + "".join(out) + closing + "\n" + body.strip() + "\n").encode("utf-8")

"""Time-aware ranking: a "when" question's answer holds a time.

A question that asks when something happened ("When did we move the CI to arm64?", "how long
ago…", "what year…") is answered by a memory that says when: "yesterday", "last week", "two
years ago", "in March", "2023". On the LoCoMo dev split 78 % of the evidence of such
questions holds a time expression, against 11 % of all memories, yet neither BM25 nor the
embedder weighs that: the words of a time are not the question's words. So after the hybrid
fusion, a "when" question's candidates that hold a time gain `WHEN_GAIN` (fused scores lie in
[0, 1]); every other question is ranked as before. Measured with tests/bench/tune_hybrid.py
--levers --only when (docs/recall.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

WHEN_GAIN = 0.1
DEPTH = 50  # the candidates looked at (further down, few stand within WHEN_GAIN of the top)

_UNITS = frozenset(
    [
        "day",
        "days",
        "week",
        "weeks",
        "weekend",
        "weekends",
        "month",
        "months",
        "year",
        "years",
        "night",
        "morning",
        "afternoon",
        "evening",
        "summer",
        "winter",
        "spring",
        "autumn",
        "fall",
        "semester",
        "quarter",
        "sprint",
        "release",
    ]
)
_DAYS = frozenset(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])
# the months that say when on their own: "may" is left out (as a verb it says nothing of
# when; here it is a month only after the words of _LEADS and the like); the dream's merge
# rules ask the same (dream/rules.py)
MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)
_SAYS_WHEN = (
    frozenset(  # a word that says when on its own
        ["yesterday", "today", "tonight", "tomorrow", "recently", "lately", "ago"]
    )
    | MONTHS
    | _DAYS
)
_LEADS = frozenset(
    ["last", "next", "this", "past", "coming", "previous"]
)  # "last week", "next Friday"
_MAY_LEADS = frozenset(["in", "early", "mid", "late", "since", "until", "of"])
_WORD = re.compile(r"[a-z]+|\d+")
_WHEN = re.compile(
    r"^\W*when\b|\bwhen (?:did|was|were|is|are|do|does|will|has|have|had)\b|"
    r"\bhow long\b|\b(?:what|which) (?:year|month|date|day|week|weekend|time of year)\b",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """Whether `query` asks when something happened (or how long ago, or what year)."""
    return _WHEN.search(query) is not None


def holds_time(text: str) -> bool:
    """Whether `text` says when: a relative day or period, a date, a year, a month, a weekday.
    By words, not one regular expression of alternatives (ten times slower on a 200-char text)."""
    words = _WORD.findall(text.lower())
    before = ""
    for n, word in enumerate(words):
        if (
            word in _SAYS_WHEN
            or (before in _LEADS and (word in _UNITS or word in _DAYS))
            or (word.isdigit() and len(word) == 4 and 1600 <= int(word) < 3000)
            or (word == "may" and (before in _MAY_LEADS or _number_follows(words, n)))
        ):
            return True
        before = word
    return False


def _number_follows(words: list[str], n: int) -> bool:
    return n + 1 < len(words) and words[n + 1].isdigit()


def favour_times(
    query: str,
    ranked: Sequence[tuple[str, float]],
    text_of: Callable[[str], str | None],
    gain: float = WHEN_GAIN,
) -> list[tuple[str, float]]:
    """`ranked` (best first) with, for a "when" question, `gain` added to each of the first
    DEPTH candidates whose text (`text_of`) holds a time, re-sorted; unchanged otherwise."""
    if not ranked or not asks_when(query):
        return list(ranked)
    head = []
    for i, s in ranked[:DEPTH]:
        text = text_of(i)
        head.append((i, s + gain if text is not None and holds_time(text) else s))
    head.sort(key=lambda kv: (-kv[1], kv[0]))
    return head + list(ranked[DEPTH:])

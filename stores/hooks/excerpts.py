"""How much of each recalled memory a message shows: the lines of a message's recall fit in
RECALL_CHARS, a memory's text cut to the part around the query's words when they would not.

Which memories are injected is the ranking's and the relevance rule's (inject.py); this only
decides how much of each is shown, so it costs no recall: every memory recalled keeps its
line and its id (search_memory shows the whole text). When the lines do not fit, each memory
may show up to a share of the room that falls with its rank (the k-th a 1/(1 + DECAY·k) part
of the first's), never less than FLOOR characters; a memory shorter than its share is shown
whole and leaves the rest to the others. A cut text is the window of it that holds the most
of the query's words, '…' where text was left out.

Measured on the LoCoMo dev questions (tests/bench/injection_bench.py): the eight lines a
question recalls took 1,648 characters (median); within 1,000, the answer's words an evidence
memory holds are still shown 75% of the time (a flat cap of 100 characters a memory kept 61%,
the sentences holding the query's words, at a flat share, 51%).

Imports nothing heavy."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
from dreamwell.stores.model import MemoryEntry

RECALL_CHARS = 1000  # characters the memory lines of one message take at most
FLOOR = 60  # characters of a memory's text shown at least
DECAY = 0.5  # how fast a memory's share of the room falls with its rank
ELLIPSIS = "…"
_WORD = re.compile(r"\w+")
_START = re.compile(r"\b\w")  # a word's first character


def shown(
    entries: Sequence[MemoryEntry],
    query: str,
    line: Callable[[MemoryEntry, str], str],
    room: int = RECALL_CHARS,
) -> list[str]:
    """The lines of `entries` (`line(entry, text)`, a newline each) within `room` characters
    where cutting their texts to FLOOR can make them fit: whole when they fit as they are."""
    bare = sum(len(line(e, "")) + 1 for e in entries)
    caps = shares([len(e.content) for e in entries], room - bare)
    return [
        line(e, e.content if cap is None else excerpt(e.content, query, cap))
        for e, cap in zip(entries, caps, strict=True)
    ]


def shares(lengths: Sequence[int], room: int) -> list[int | None]:
    """The characters each text may take (None: all of it) so that together they fit in
    `room`: the largest scale whose rank-weighted shares fit, none below FLOOR."""
    if sum(lengths) <= room:
        return [None] * len(lengths)
    weights = [1.0 / (1.0 + DECAY * k) for k in range(len(lengths))]

    def used(scale: float) -> int:
        return sum(
            min(n, max(FLOOR, int(scale * w))) for n, w in zip(lengths, weights, strict=True)
        )

    low, high = 0.0, float(max(lengths)) / weights[-1]
    for _ in range(32):  # bisection: `used` grows with the scale
        mid = (low + high) / 2
        low, high = (mid, high) if used(mid) <= room else (low, mid)
    caps = [max(FLOOR, int(low * w)) for w in weights]
    return [None if n <= cap else cap for n, cap in zip(lengths, caps, strict=True)]


def query_words(query: str) -> set[str]:
    """The words of `query` that say what it is about, roughly stemmed."""
    return {stem(w) for w in _WORD.findall(query.lower()) if w not in ENGLISH_STOPWORDS}


def excerpt(text: str, query: str, cap: int) -> str:
    """`text` in at most `cap` characters: from its start, or from the query word after which
    the window holds the most distinct query words (the earliest of equals), '…' where text
    was left out."""
    if len(text) <= cap:
        return text
    wanted = query_words(query)
    hits = [
        (m.start(), m.end(), w)
        for m in _WORD.finditer(text)
        if (w := stem(m.group().lower())) in wanted
    ]
    best = len({w for _, e, w in hits if e <= cap - 1})
    start, width = 0, cap - 1
    held: Counter[str] = Counter()
    ahead = 0
    for k, (at, _, _) in enumerate(hits):  # windows from each query word, in one pass
        if 0 < k <= ahead:  # the word before this one leaves the window
            gone = hits[k - 1][2]
            held[gone] -= 1
            if not held[gone]:
                del held[gone]
        ahead = max(ahead, k)
        while ahead < len(hits) and hits[ahead][1] <= at + cap - 2:
            held[hits[ahead][2]] += 1
            ahead += 1
        if len(held) > best:
            best, start, width = len(held), at, cap - 2
    if start and start + width > len(text):  # the window's end is the text's: fill it
        start = _word_start(text, len(text) - width)
    piece = text[start : start + width]
    if start + width < len(text) and " " in piece.strip():
        piece = piece.rstrip().rsplit(" ", 1)[0]  # no word cut in two
    lead = ELLIPSIS if start else ""
    return lead + piece.rstrip() + (ELLIPSIS if start + len(piece) < len(text) else "")


def _word_start(text: str, at: int) -> int:
    """The start of the first word at or after `at`."""
    found = _START.search(text, at)
    return found.start() if found is not None else at


def stem(word: str) -> str:
    """`word` without a plural's or a tense's ending (the index's stemmer, roughly): the
    hooks' words, here and in quick_recall.py."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word

"""How much of each recalled memory a message shows (issue 54: eight whole memories took
1,648 characters a LoCoMo question): within RECALL_CHARS, each memory keeps its line and id,
its text cut to the part around the query's words, the best ranked keeping the most."""

from __future__ import annotations

from dreamwell.stores import MemoryEntry, utcnow
from dreamwell.stores.hooks import RECALL_CHARS, shown
from dreamwell.stores.hooks.excerpts import FLOOR, excerpt, shares

FILLER = "We talked about the weather, the traffic and the new coffee machine for a while. "


def _line(entry: MemoryEntry, text: str) -> str:
    return f"- [{entry.id}] ({entry.category}): {text}"


def _entry(n: int, content: str) -> MemoryEntry:
    when = utcnow()
    return MemoryEntry(f"{n:012x}", content, "notes", (), when, when, when)


def test_lines_that_fit_are_shown_whole() -> None:
    entries = [_entry(n, f"The staging database runs postgres {n}") for n in range(8)]
    assert shown(entries, "postgres version", _line) == [_line(e, e.content) for e in entries]


def test_eight_long_memories_fit_the_room_each_with_its_line_and_the_query_s_words() -> None:
    answer = "Melanie signed up for a pottery class on Tuesday."
    entries = [_entry(n, FILLER * 4 + answer + " " + FILLER * 2) for n in range(8)]
    lines = shown(entries, "When did Melanie sign up for a pottery class?", _line)
    assert sum(len(line) + 1 for line in lines) <= RECALL_CHARS
    assert all(f"[{e.id}]" in line for e, line in zip(entries, lines, strict=True))
    assert "pottery class" in lines[0] and "Melanie" in lines[0]
    assert lines[0].count("…") == 2  # cut before and after
    assert len(lines[0]) > len(lines[-1])  # the best ranked keeps the most


def test_shares_leave_a_short_text_whole_and_never_go_below_the_floor() -> None:
    caps = shares([40, 900, 900, 900], 600)
    assert caps[0] is None and all(c is not None and c >= FLOOR for c in caps[1:])
    assert caps[1] is not None and caps[3] is not None and caps[1] > caps[3]
    assert 40 + sum(c for c in caps[1:] if c is not None) <= 600


def test_an_excerpt_is_at_most_its_cap_and_cuts_no_word() -> None:
    text = FILLER * 3 + "The deploy script lives in tools/release.sh and needs a token."
    for cap in (FLOOR, 80, 150):
        cut = excerpt(text, "where is the deploy script", cap)
        assert len(cut) <= cap and "deploy script" in cut
        inner = cut.strip("…").split()
        assert all(w in text.split() or w.rstrip(".,") in text for w in inner)
    assert excerpt("short", "anything", 60) == "short"

"""How counts are worded for people: "1 memory", "2 memories" (issue 44: "Found 1 memory
entries", "1 sessions, 1 turns, 1 failures")."""

from __future__ import annotations


def plural(n: int, one: str, many: str | None = None) -> str:
    """`n` and the noun for it: `one` for exactly 1, else `many` (default `one` + "s")."""
    return f"{n} {one if n == 1 else many or one + 's'}"

"""How counts and durations are worded for people: "1 memory", "2 memories" (issue 44: "Found
1 memory entries", "1 sessions, 1 turns, 1 failures"); "4m32s", "2d3h"."""

from __future__ import annotations

from datetime import timedelta


def plural(n: int, one: str, many: str | None = None) -> str:
    """`n` and the noun for it: `one` for exactly 1, else `many` (default `one` + "s")."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def duration(delta: timedelta) -> str:
    """4m32s, 4h12m, 2d3h — whole seconds, never negative."""
    secs = max(0, int(delta.total_seconds()))
    days, rest = divmod(secs, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{seconds}s"

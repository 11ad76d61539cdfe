"""`dreamwell stats`' view of the client hooks: per client and session, the user turns recorded
and the memories injected in the last 24 hours, and the failures in hooks.log, so that hooks
which run but store or show nothing are visible at a glance."""

from __future__ import annotations

import time
from datetime import datetime

from dreamwell.stores.hookstate import DAY, HookSessions
from dreamwell.stores.layout import DataDir

MAX_SESSIONS_SHOWN = 10


def recent_failures(dirs: DataDir, now: float) -> list[str]:
    """hooks.log lines of the last day that say a hook failed."""
    try:
        lines = dirs.hooks_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        stamp, _, rest = line.partition(" ")
        try:
            when = datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            continue
        if when > now - DAY and " failed" in f" {rest}":
            out.append(line)
    return out


def hook_lines(dirs: DataDir, now: float | None = None) -> list[str]:
    """The stats section for one tenant's directory (empty when no hook ever ran there)."""
    now = time.time() if now is None else now
    rows: list[tuple[str, str, int, int, int]] = []
    for state in HookSessions(dirs).all():
        turns, recalls, memories = state.last_day(now)
        if turns or recalls:
            rows.append((state.client, state.session, turns, recalls, memories))
    failures = recent_failures(dirs, now)
    if not rows and not failures:
        return []
    total = [sum(r[2] for r in rows), sum(r[3] for r in rows), sum(r[4] for r in rows)]
    lines = [
        f"  client hooks, last 24 h: {len(rows)} sessions, {total[0]} turns recorded, "
        f"{total[1]} prompts recalled for, {total[2]} memories injected, "
        f"{len(failures)} failures"
    ]
    if rows and not total[2]:
        lines.append(
            "    NO MEMORY INJECTED: the hooks run but found nothing to show; is the store "
            "empty (dreamwell stats above) or on another data directory?"
        )
    if rows and not total[0]:
        lines.append("    NO TURN RECORDED: is record_conversation false?")
    rows.sort(key=lambda r: (-r[2] - r[3], r[1]))
    for client, session, turns, recalls, memories in rows[:MAX_SESSIONS_SHOWN]:
        lines.append(
            f"    {client} {session[:36]}: {turns} turns, {recalls} recalls, {memories} memories"
        )
    if len(rows) > MAX_SESSIONS_SHOWN:
        lines.append(f"    … {len(rows) - MAX_SESSIONS_SHOWN} more sessions")
    lines += [f"    failure: {line[:160]}" for line in failures[-3:]]
    return lines

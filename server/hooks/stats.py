"""What the client hooks did lately, read from what they keep (`hooks/<session>.json`,
`hooks.log`): per client and session, the user turns recorded and the memories injected in the
last 24 hours, and the failures in hooks.log, so that hooks which run but store or show nothing
are visible at a glance. `dreamwell stats` prints it (`hook_lines`), the browser's overview
shows it (`hook_activity`); both read it here, once."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dreamwell.server.wording import plural
from dreamwell.stores import DataDir
from dreamwell.stores.hooks import DAY, HookSessions

MAX_SESSIONS_SHOWN = 10
NO_MEMORY = (
    "no memory was injected in the last 24 hours although {stored} stored: do the hooks "
    "read another data directory (--data-dir in their command)?"
)
NO_TURN = "NO TURN RECORDED: is record_conversation false?"


@dataclass(frozen=True)
class SessionActivity:
    client: str
    session: str
    cwd: str
    turns: int
    recalls: int
    memories: int
    last: float  # unix time of its latest event
    tokens: int = 0  # what its hooks injected into its context in all, ≈ characters / 4


@dataclass
class HookActivity:
    """The last day's activity of one tenant's hooks (busiest sessions first)."""

    sessions: list[SessionActivity] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # hooks.log lines, oldest first
    last_run: str = ""  # the time of hooks.log's latest line (ISO), "" when none

    def totals(self) -> tuple[int, int, int]:
        """(turns recorded, prompts recalled for, memories injected)."""
        s = self.sessions
        return sum(r.turns for r in s), sum(r.recalls for r in s), sum(r.memories for r in s)

    def warnings(self, stored: int | None = None) -> list[str]:
        """What looks wrong. Injecting nothing is normal while the store is empty (a user's
        first session): it is said only when `stored` memories were there to inject and the
        hooks of two sessions or more injected none."""
        turns, _, memories = self.totals()
        quiet = len(self.sessions) >= 2 and not memories and bool(stored)
        held = f"{stored} memories are" if stored != 1 else "1 memory is"
        out = [NO_MEMORY.format(stored=held)] if quiet else []
        return out + ([NO_TURN] if self.sessions and not turns else [])

    def to_json(self, stored: int | None = None) -> dict[str, Any]:
        turns, recalls, memories = self.totals()
        return {
            "sessions": len(self.sessions),
            "turns": turns,
            "recalls": recalls,
            "memories": memories,
            "failures": len(self.failures),
            "last_failures": self.failures[-3:],
            "last_run": self.last_run,
            "warnings": self.warnings(stored),
            "recent": [
                {**vars(r), "last": datetime.fromtimestamp(r.last, UTC).isoformat()}
                for r in self.sessions[:MAX_SESSIONS_SHOWN]
            ],
        }


def hooks_mark(dirs: DataDir) -> str:
    """Moves whenever a hook ran (it rewrites its session file in `hooks/` and appends to
    hooks.log): two stat() calls, for a page that polls."""
    marks = []
    for path in (dirs.hooks, dirs.hooks_log):
        try:
            found = path.stat()
            marks.append(f"{found.st_mtime_ns}.{found.st_size}")
        except OSError:
            marks.append("-")
    return ":".join(marks)


def _log_lines(dirs: DataDir) -> list[str]:
    try:
        return dirs.hooks_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _stamp(line: str) -> float | None:
    try:
        return datetime.fromisoformat(line.partition(" ")[0]).timestamp()
    except ValueError:
        return None


def recent_failures(dirs: DataDir, now: float, lines: list[str] | None = None) -> list[str]:
    """hooks.log lines of the last day that say a hook failed."""
    out = []
    for line in _log_lines(dirs) if lines is None else lines:
        when = _stamp(line)
        if when is not None and when > now - DAY and " failed" in f" {line.partition(' ')[2]}":
            out.append(line)
    return out


def hook_activity(dirs: DataDir, now: float | None = None) -> HookActivity:
    now = time.time() if now is None else now
    rows = []
    for state in HookSessions(dirs).all():
        turns, recalls, memories = state.last_day(now)
        if state.active_since(now - DAY):
            last = max(e[0] for e in state.events)
            rows.append(
                SessionActivity(
                    state.client,
                    state.session,
                    state.cwd,
                    turns,
                    recalls,
                    memories,
                    last,
                    (state.injected_chars + 3) // 4,
                )
            )
    rows.sort(key=lambda r: (-r.turns - r.recalls, r.session))
    lines = _log_lines(dirs)
    stamped = [line for line in lines if _stamp(line) is not None]
    last_run = stamped[-1].partition(" ")[0] if stamped else ""
    return HookActivity(rows, recent_failures(dirs, now, lines), last_run)


def hook_lines(dirs: DataDir, now: float | None = None, stored: int | None = None) -> list[str]:
    """The stats section for one tenant's directory (empty when no hook ran in a day);
    `stored`: the live memories, which the hooks could have injected."""
    found = hook_activity(dirs, now)
    rows, failures = found.sessions, found.failures
    if not rows and not failures:
        return []
    turns, recalls, memories = found.totals()
    lines = [
        f"  client hooks, last 24 h: {plural(len(rows), 'session')}, "
        f"{plural(turns, 'turn')} recorded, {plural(recalls, 'prompt')} recalled for, "
        f"{plural(memories, 'memory', 'memories')} injected, "
        f"{plural(len(failures), 'failure')}"
    ]
    lines += [f"    {w}" for w in found.warnings(stored)]
    for r in rows[:MAX_SESSIONS_SHOWN]:
        lines.append(
            f"    {r.client} {r.session[:36]}: {plural(r.turns, 'turn')}, "
            f"{plural(r.recalls, 'recall')}, {plural(r.memories, 'memory', 'memories')}, "
            f"~{plural(r.tokens, 'token')} injected"
        )
    if len(rows) > MAX_SESSIONS_SHOWN:
        lines.append(f"    … {len(rows) - MAX_SESSIONS_SHOWN} more sessions")
    lines += [f"    failure: {line[:160]}" for line in failures[-3:]]
    return lines

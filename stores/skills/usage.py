"""Uses of skills (docs/skills.md): one line per use in the bounded `skill-usage.jsonl`
(`{"ts", "session", "skill", "via": "prompt" | "resource" | "hook"}`), and what is derived
from it: uses in the last 30 days, last use, and pairs used in the same session. Usage never
rewrites a skill record, so a use cannot race an edit."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from dreamwell.stores.errors import InvalidInput
from dreamwell.stores.inputs.jsonl_log import JsonlLog
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import utcnow

USAGE_MAX_BYTES = 1024 * 1024  # past it, the oldest half of the uses is dropped
VIAS = ("prompt", "resource", "hook")
WINDOW = timedelta(days=30)


@dataclass(frozen=True)
class UsageStats:
    uses_30d: dict[str, int]
    last_used: dict[str, str]  # ISO time of each skill's latest use
    co_used: list[tuple[str, str, int]]  # (a, b, sessions using both), most first


class SkillUsage:
    def __init__(self, data_dir: Path | DataDir) -> None:
        layout = data_dir if isinstance(data_dir, DataDir) else DataDir(data_dir)
        self.log = JsonlLog(layout.root, layout.skill_usage, max_bytes=USAGE_MAX_BYTES)

    def record_use(self, session: str, skill: str, via: str, now: datetime | None = None) -> None:
        """One use of `skill` by caller `session` (raises InvalidInput, StoreBusy, WriteFailed)."""
        if via not in VIAS:
            raise InvalidInput(f"via must be one of {', '.join(VIAS)}; got {via!r}")
        self.log.append({"session": session, "skill": skill, "via": via}, now=now)

    def stats(self, now: datetime | None = None) -> UsageStats:
        since = ((now or utcnow()) - WINDOW).isoformat()
        uses: Counter[str] = Counter()
        last: dict[str, str] = {}
        sessions: defaultdict[str, set[str]] = defaultdict(set)
        for record in self.log.read():
            skill, ts, session = record.get("skill"), record.get("ts"), record.get("session")
            if not isinstance(skill, str) or not isinstance(ts, str):
                continue
            if ts >= since:
                uses[skill] += 1
            if ts > last.get(skill, ""):
                last[skill] = ts
            if isinstance(session, str):
                sessions[session].add(skill)
        pairs: Counter[tuple[str, str]] = Counter()
        for used in sessions.values():
            names = sorted(used)
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    pairs[(a, b)] += 1
        co = sorted(((a, b, n) for (a, b), n in pairs.items()), key=lambda t: (-t[2], t[0], t[1]))
        return UsageStats(dict(uses), last, co)

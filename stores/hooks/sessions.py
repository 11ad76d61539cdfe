"""What client hooks keep between calls: one small JSON file per client session
(`hooks/<session>.json`: what was injected, how far the transcript was read, which user turns
were recorded) and `hooks.log`, a bounded plain-text log of their activity and failures.

A hook is a fresh process per event, so this is its only memory; files untouched for a week
are pruned. Writes are atomic (temp file + rename): a reader sees the old state or the new."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime

from dreamwell.stores.files import write_atomic
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import utcnow

MAX_AGE_SECONDS = 7 * 86400
HOOKS_LOG_MAX_BYTES = 256 * 1024
_KEEP_RECORDED = 500  # hashes of recorded user turns kept per session
_KEEP_INJECTED = 2000
_KEEP_EVENTS = 5000
DAY = 86400.0


def turn_hash(text: str) -> str:
    """A short stable hash of a user turn's text (whitespace-insensitive)."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8", "replace")).hexdigest()[:16]


@dataclass
class HookSession:
    session: str
    client: str = "claude-code"
    cwd: str = ""
    started: str = ""
    offset: int = 0  # bytes of the transcript already read
    injected: list[str] = field(default_factory=list)  # memory ids shown in this session
    skills: list[str] = field(default_factory=list)  # skill names shown in this session
    recorded: list[str] = field(default_factory=list)  # turn_hash of recorded user turns
    turns: int = 0
    recalls: int = 0
    # the last day's activity, for `dreamwell stats`: [unix time, 0 = a turn recorded |
    # 1 = a prompt's recall hook ran | 2 = a session-start hook ran, memories it injected]
    events: list[list[float]] = field(default_factory=list)

    def note(self, kind: str, memories: int = 0, now: float | None = None) -> None:
        """`kind`: "turn", "recall" (a prompt's) or "start" (a session start's injection)."""
        now = time.time() if now is None else now
        code = {"turn": 0.0, "recall": 1.0}.get(kind, 2.0)
        self.events = [e for e in self.events if e[0] > now - DAY][-_KEEP_EVENTS:]
        self.events.append([now, code, float(memories)])

    def last_day(self, now: float | None = None) -> tuple[int, int, int]:
        """(turns recorded, prompts recalled for, memories injected by prompts and session
        starts) in the last 24 hours."""
        now = time.time() if now is None else now
        recent = [e for e in self.events if e[0] > now - DAY]
        turns = sum(1 for e in recent if e[1] == 0.0)
        prompts = sum(1 for e in recent if e[1] == 1.0)
        return turns, prompts, int(sum(e[2] for e in recent if e[1] != 0.0))

    def active_since(self, since: float) -> bool:
        """Whether any hook of this session ran after `since` (unix time)."""
        return any(e[0] > since for e in self.events)

    def mark_recorded(self, text: str) -> bool:
        """Note a user turn; False when it was recorded already."""
        digest = turn_hash(text)
        if digest in self.recorded:
            return False
        self.recorded = [*self.recorded, digest][-_KEEP_RECORDED:]
        return True

    def mark_injected(self, ids: list[str]) -> None:
        self.injected = [*self.injected, *(i for i in ids if i not in self.injected)][
            -_KEEP_INJECTED:
        ]


class HookSessions:
    def __init__(self, dirs: DataDir) -> None:
        self.dirs = dirs

    @contextlib.contextmanager
    def held(self, session_id: str, wait: float = 2.0) -> Iterator[bool]:
        """One hook of a session at a time between its load and its save (an agent may run
        two at once: Copilot CLI its session start and its prompt's), waiting at most `wait`
        seconds; whether it was had (not: the hook goes on, a prompt must not wait longer).
        No lock where there is no fcntl (Windows)."""
        try:
            import fcntl
        except ImportError:
            yield False
            return
        self.dirs.hooks.mkdir(parents=True, exist_ok=True)
        path = self.dirs.hook_session(session_id).with_suffix(".lock")
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    had = True
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        had = False
                        break
                    time.sleep(0.01)
            yield had
        finally:
            os.close(fd)

    def load(self, session_id: str) -> HookSession:
        """The session's state; a new one when there is none or it is damaged."""
        try:
            data = json.loads(self.dirs.hook_session(session_id).read_text(encoding="utf-8"))
            state = HookSession(**data)
            if state.session == session_id:
                return state
        except (OSError, ValueError, TypeError):
            pass
        return HookSession(session_id, started=utcnow().isoformat())

    def save(self, state: HookSession) -> None:
        self.dirs.hooks.mkdir(parents=True, exist_ok=True)
        write_atomic(self.dirs.hook_session(state.session), json.dumps(asdict(state)))

    def all(self) -> list[HookSession]:
        """Every session's state (damaged files skipped)."""
        out = []
        for path in sorted(self.dirs.hooks.glob("*.json")) if self.dirs.hooks.is_dir() else []:
            try:
                out.append(HookSession(**json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError):
                continue
        return out

    def prune(self, max_age: float = MAX_AGE_SECONDS) -> int:
        """Delete session files untouched for `max_age` seconds; how many went."""
        if not self.dirs.hooks.is_dir():
            return 0
        cutoff = time.time() - max_age
        gone = 0
        for path in [*self.dirs.hooks.glob("*.json"), *self.dirs.hooks.glob("*.lock")]:
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    gone += 1
            except OSError:
                continue
        return gone


def hooks_log(dirs: DataDir, line: str, now: datetime | None = None) -> None:
    """Append one line to `hooks.log`; past its bound the oldest half is dropped. Never
    raises: a hook that cannot even log still must not break the prompt."""
    text = f"{(now or utcnow()).isoformat(timespec='seconds')} {' '.join(line.split())}\n"
    path = dirs.hooks_log
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, text.encode("utf-8", "replace")[:4096])
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > HOOKS_LOG_MAX_BYTES:
            lines = path.read_bytes().splitlines(keepends=True)
            write_atomic(path, b"".join(lines[len(lines) // 2 :]).decode("utf-8", "replace"))
    except OSError:
        pass

"""The dream that starts by itself (docs/dreaming.md, `dream_auto`): a session end (the
`session-end` hook) or a `serve` idle for 10 minutes starts one detached `dreamwell dream --once`,
at the lowest CPU priority, when the last cycle is older than `dream_auto_after` and at least
`dream_auto_sessions` client sessions were recorded since.

Cheap enough for a hook: a few `stat()` calls, one directory listing and two locks taken
without waiting; nothing here imports pydantic, LanceDB or the dream layer. One at a time:
the decision is taken under `.auto-dream.lock` (a second trigger at the same moment gives
up), it is written down (`.auto-dream.started`, whose time counts as the last cycle's, so a
second trigger inside `dream_auto_after` starts nothing), and nothing starts while a cycle
holds the dream lock (or lease). After cycles whose LLM failed, the wait doubles for each
(dream/backoff.py), up to a week.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dreamwell.stores import DataDir

if TYPE_CHECKING:
    from dreamwell.server.config import Settings
    from dreamwell.server.runtime import Runtime

logger = logging.getLogger(__name__)

IDLE_SECONDS = 600.0  # a server this long without a request may start one


@dataclass(frozen=True)
class AutoDream:
    """The `dream_auto*` settings, and the flags the dream it starts is given."""

    on: bool = True
    after: float = 86400.0  # dream_auto_after, in seconds
    sessions: int = 5  # dream_auto_sessions
    flags: tuple[str, ...] = ()  # e.g. ("--llm-provider", "claude-code")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def last_cycle(dirs: DataDir) -> float:
    """When the last cycle ended or the last dream was started by itself (0: never)."""
    return max(_mtime(dirs.last_dream), _mtime(dirs.auto_dream_started))


def sessions_since(dirs: DataDir, since: float) -> int:
    """Client sessions the hooks recorded something for after `since` (their state files)."""
    try:
        found = os.scandir(dirs.hooks)
    except OSError:
        return 0
    with found:
        return sum(
            1
            for e in found
            if e.name.endswith(".json") and not e.name.startswith(".") and _newer(e, since)
        )


def _newer(entry: os.DirEntry[str], since: float) -> bool:
    try:
        return entry.stat().st_mtime > since
    except OSError:
        return False


def due(dirs: DataDir, auto: AutoDream, now: float | None = None) -> bool:
    """`dream_auto_after` since the last cycle — doubled for each cycle in a row whose LLM
    failed (dream/backoff.py) — and `dream_auto_sessions` sessions since."""
    from dreamwell.dream import backoff

    now = time.time() if now is None else now
    last = last_cycle(dirs)
    after = backoff.wait(auto.after, backoff.read(dirs.root).failures)
    return now - last >= after and sessions_since(dirs, last) >= auto.sessions


def _dreaming(dirs: DataDir) -> bool:
    """Whether a cycle holds this store's dream lock (or lease) right now."""
    from dreamwell.stores import Held, exclusive

    try:
        with exclusive(dirs.root, "dream", dirs.dream_lock, "a dream cycle"):
            return False
    except Held:
        return True


def maybe_start(data_dir: Path, tenant: str, auto: AutoDream) -> int | None:
    """Start one detached dream of the store (`tenant` under `data_dir`) when it is due;
    its process id, or None when nothing started."""
    if not auto.on:
        return None
    dirs = DataDir(data_dir).tenant(tenant)
    if not due(dirs, auto):  # the common case: a few stat() calls, nothing more imported
        return None
    from dreamwell.stores import claimed, write_atomic

    with claimed(dirs.auto_dream_lock) as mine:  # not: another trigger is deciding right now
        if not mine or not due(dirs, auto) or _dreaming(dirs):
            return None
        pid = _spawn(data_dir, tenant, auto.flags)
        write_atomic(dirs.auto_dream_started, f"{pid}\n")
        return pid


def _spawn(data_dir: Path, tenant: str, given: tuple[str, ...]) -> int:
    from dreamwell.server.detached import start_detached  # a hook with no dream due never pays

    command = [sys.executable, "-m", "dreamwell.server", "dream", "--once"]
    command += ["--data-dir", str(data_dir), *(["--tenant", tenant] if tenant else []), *given]
    return start_detached(command, lowest_priority=True)


def of_settings(settings: Settings) -> AutoDream:
    """The `dream_auto*` settings, and the LLM settings the dream it starts is given."""
    from dreamwell.server.config import Settings
    from dreamwell.server.flags import parse_every

    flags: list[str] = []
    for name in ("llm_provider", "llm_model", "claude_path", "dream_budget_tokens"):
        value = getattr(settings, name)
        if value is not None and value != Settings.model_fields[name].default:
            flags += ["--" + name.replace("_", "-"), str(value)]
    return AutoDream(
        settings.dream_auto,
        parse_every(settings.dream_auto_after),
        settings.dream_auto_sessions,
        tuple(flags),
    )


async def dream_when_idle(runtime: Runtime, period: float = 60.0) -> None:
    """`dream_auto` inside `serve`: once no request came for 10 minutes, start a detached
    dream of each open store that is due one (server/auto_dream.py), once per pause."""
    import anyio
    import anyio.to_thread

    from dreamwell.stores import StoreError

    auto = of_settings(runtime.settings)
    began, tried = time.monotonic(), -1
    while auto.on:
        await anyio.sleep(period)
        quiet = time.monotonic() - max(began, runtime.last_served)
        if runtime.serving or quiet < IDLE_SECONDS or tried == runtime.served:
            continue
        tried = runtime.served
        for name in ["", *DataDir(runtime.settings.data_dir).tenants()]:
            try:
                pid = await anyio.to_thread.run_sync(
                    maybe_start, runtime.settings.data_dir, name, auto
                )
            except (OSError, StoreError) as exc:
                logger.warning("no dream started in %s: %s", name or "the root store", exc)
                continue
            if pid is not None:
                logger.info("idle: started a dream of %s (pid %d)", name or "the root store", pid)

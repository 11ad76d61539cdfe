"""`dreamwell stats` shows what the client hooks did in the last day, per client and session,
so that hooks which run but inject nothing ("218 sessions, zero memories") are seen at once."""

from __future__ import annotations

import time
from pathlib import Path

from dreamwell.server.hooks.stats import hook_lines
from dreamwell.stores.hooks.sessions import HookSessions
from dreamwell.stores.layout import DataDir
from tests.support.cli import dreamwell
from tests.support.hooks import DEPLOY, event, hook, prompt, seeded


def stats(data: Path) -> str:
    done = dreamwell("stats", "--data-dir", str(data), "--embedder", "none")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_stats_counts_turns_injected_memories_and_tokens_per_session(tmp_path: Path) -> None:
    seeded(tmp_path)
    shown = hook("user-prompt", prompt("s1", "deploy the api"), tmp_path).stdout
    assert DEPLOY in shown
    hook("user-prompt", prompt("s1", "and then?"), tmp_path)
    hook("user-prompt", prompt("s2", "nothing matches zzyzx"), tmp_path)
    hook("user-prompt", b"{broken", tmp_path)
    out = stats(tmp_path)
    assert (
        "client hooks, last 24 h: 2 sessions, 3 turns recorded, 3 prompts recalled for, "
        "1 memory injected, 1 failure" in out
    )
    tokens = (len(shown.rstrip("\n")) + 3) // 4
    assert f"claude-code s1: 2 turns, 2 recalls, 1 memory, ~{tokens} tokens injected" in out
    # nothing relevant, nothing injected (a first turn was given 4 recent memories)
    assert "claude-code s2: 1 turn, 1 recall, 0 memories, ~0 tokens injected" in out
    assert "NO MEMORY INJECTED" not in out


def test_a_first_session_on_an_empty_store_is_no_alarm(tmp_path: Path) -> None:
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    hook("session-start", start, tmp_path)
    hook("user-prompt", prompt("s1", "what do you remember?"), tmp_path)
    out = stats(tmp_path)
    assert "1 session, 1 turn recorded, 1 prompt recalled for, 0 memories injected" in out
    assert "no memory was injected" not in out and "NO MEMORY" not in out


def test_sessions_that_inject_nothing_from_a_full_store_are_named(tmp_path: Path) -> None:
    seeded(tmp_path)
    sessions = HookSessions(DataDir(tmp_path))
    for name in ("s1", "s2"):  # as hooks reading another data directory leave it
        state = sessions.load(name)
        state.note("turn")
        state.note("recall", 0)
        sessions.save(state)
    out = stats(tmp_path)
    assert "2 sessions, 2 turns recorded, 2 prompts recalled for, 0 memories injected" in out
    assert (
        "    no memory was injected in the last 24 hours although 4 memories are stored: do " in out
    )


def test_session_starts_are_not_counted_as_prompts(tmp_path: Path) -> None:
    seeded(tmp_path)
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    hook("session-start", start, tmp_path)
    hook("session-start", start | {"source": "clear"}, tmp_path)
    hook("user-prompt", prompt("s1", "deploy the api"), tmp_path)
    line = hook_lines(DataDir(tmp_path))[0]
    assert "1 session, 1 turn recorded, 1 prompt recalled for" in line


def test_only_the_last_day_counts(tmp_path: Path) -> None:
    sessions = HookSessions(DataDir(tmp_path))
    state = sessions.load("old")
    state.note("turn", now=time.time() - 2 * 86400)
    state.note("recall", 4, now=time.time() - 2 * 86400)
    sessions.save(state)
    assert hook_lines(DataDir(tmp_path)) == []
    state.note("recall", 2)
    sessions.save(state)
    assert (
        "1 session, 0 turns recorded, 1 prompt recalled for, 2 memories"
        in hook_lines(DataDir(tmp_path))[0]
    )

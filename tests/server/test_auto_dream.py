"""The dream that starts by itself (docs/dreaming.md, `dream_auto`): the real `dreamwell hook
session-end` starts one detached `dreamwell dream --once` when the last cycle is older than
`dream_auto_after` and enough sessions were recorded since; a second trigger inside that
time starts nothing, two at once start one, and none starts while a cycle runs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from dreamwell.dream.report import list_reports
from dreamwell.server import auto_dream
from dreamwell.server.auto_dream import AutoDream, due, maybe_start
from dreamwell.server.config import Settings
from dreamwell.server.runtime import Runtime
from dreamwell.stores import DataDir, exclusive
from tests.support.hooks import Transcript, event, hook, log_lines, seeded, wait_for_pid

EVERY_SESSION = ("--dream-auto-sessions", "1")


def session(data: Path, name: str) -> dict[str, object]:
    """One client session: a user turn in its transcript, and the session-end hook's input."""
    transcript = Transcript(data.parent / f"{name}.jsonl", name)
    transcript.user(f"deploy the api ({name})")
    return event(name, "SessionEnd", transcript.path, reason="exit")


def started(data: Path) -> int | None:
    path = DataDir(data).auto_dream_started
    return int(path.read_text()) if path.exists() else None


def test_a_session_end_starts_one_dream_at_the_lowest_priority(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seeded(data)
    done = hook("session-end", session(data, "s1"), data, *EVERY_SESSION)
    assert done.returncode == 0 and done.stdout == ""
    pid = started(data)
    assert pid is not None
    with contextlib.suppress(FileNotFoundError):  # field 19 of /proc/PID/stat: its nice value
        assert Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[16] == "19"
    assert f"session-end started a dream (pid {pid})" in "\n".join(log_lines(data))
    wait_for_pid(pid)
    runs = list_reports(data)
    assert len(runs) == 1
    report = json.loads((data / "dreams" / f"{runs[0]}.json").read_text())
    assert not report["dry_run"] and report["finished"]
    assert DataDir(data).last_dream.exists()


def test_a_second_trigger_inside_dream_auto_after_starts_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seeded(data)
    hook("session-end", session(data, "s1"), data, *EVERY_SESSION)
    first = started(data)
    assert first is not None
    wait_for_pid(first)
    hook("session-end", session(data, "s2"), data, *EVERY_SESSION)
    assert started(data) == first  # nothing new was started
    assert len(list_reports(data)) == 1


def test_two_triggers_at_once_start_one_dream(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seeded(data)
    hooks = []
    for name in ("s1", "s2"):
        raw = json.dumps(session(data, name)).encode()
        command = [sys.executable, "-m", "dreamwell.server", "hook", "session-end"]
        command += ["--data-dir", str(data), *EVERY_SESSION]
        child = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
        )
        hooks.append((child, raw))
    for child, raw in hooks:
        assert child.stdin is not None
        child.stdin.write(raw)
        child.stdin.close()
    for child, _ in hooks:
        assert child.wait(60) == 0
    pid = started(data)
    assert pid is not None
    wait_for_pid(pid)
    assert len([line for line in log_lines(data) if "started a dream" in line]) == 1
    assert len(list_reports(data)) == 1


def test_no_dream_starts_before_enough_sessions_or_when_turned_off(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seeded(data)
    hook("session-end", session(data, "s1"), data)  # the default: 5 sessions
    off = {"DREAMWELL_DREAM_AUTO": "false"}
    hook("session-end", session(data, "s2"), data, *EVERY_SESSION, env=off)
    assert started(data) is None and list_reports(data) == []
    assert not due(DataDir(data), AutoDream(sessions=5))
    assert due(DataDir(data), AutoDream(sessions=2))


def test_no_dream_starts_while_a_cycle_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seeded(data)
    hook("session-end", session(data, "s1"), data, env={"DREAMWELL_DREAM_AUTO": "false"})
    dirs = DataDir(data)
    with exclusive(data, "dream", dirs.dream_lock, "a dream cycle"):
        assert maybe_start(data, "", AutoDream(sessions=1)) is None
    assert started(data) is None


@pytest.mark.anyio
async def test_a_server_idle_long_enough_starts_a_dream_once_per_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    seeded(data)
    hook("session-end", session(data, "s1"), data, env={"DREAMWELL_DREAM_AUTO": "false"})
    monkeypatch.setattr(auto_dream, "IDLE_SECONDS", 0.2)  # ten minutes, shortened
    settings = Settings(data_dir=data, embedder="none", dream_auto_sessions=1)
    runtime = Runtime(settings)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(auto_dream.dream_when_idle, runtime, 0.05)
            while started(data) is None:
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    pid = started(data)
    assert pid is not None
    wait_for_pid(pid)
    assert len(list_reports(data)) == 1

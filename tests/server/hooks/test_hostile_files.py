"""Hostile transcripts and payloads are data, never a hazard (issue 45): a FIFO, device or
socket as `transcript_path` is refused at once instead of blocking the hook (Claude Code waits
for it), a line over 8 MiB is passed over and counted while recording goes on, and `cwd` and
skill names are redacted like the turns themselves."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from dreamwell.server.hooks.transcript import MAX_READ
from dreamwell.stores.hooks import HookSessions
from dreamwell.stores.inputs import SKILL_USAGE, JsonlLog
from dreamwell.stores.layout import DataDir
from tests.support.hooks import Transcript, event, hook, log_lines, prompt, turns

SECRET = "sk-proj-4fQ9xZ2LmN8pR7tY1uV3wA5bC6dE0gH2jK4lM6nP8qS"


def test_a_fifo_device_or_socket_transcript_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    try:
        for n, path in enumerate([fifo, Path("/dev/zero"), sock_path]):
            done = hook("stop", event("s1", "Stop", path), tmp_path / "d")  # 60 s bound
            assert done.returncode == 0 and done.stdout == ""
            assert "not a regular file" in log_lines(tmp_path / "d")[n]
    finally:
        listener.close()


def test_a_line_over_the_read_limit_is_skipped_counted_and_recording_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    talk = Transcript(path, "s1")
    talk.user("before")
    talk._line("user", [{"type": "tool_result", "tool_use_id": "t", "content": "x" * MAX_READ}])
    talk.user("AFTER the big one")
    data = tmp_path / "d"
    assert hook("stop", event("s1", "Stop", path), data).returncode == 0
    assert [t["content"] for t in turns(data)] == ["before"]
    assert hook("stop", event("s1", "Stop", path), data).returncode == 0
    assert [t["content"] for t in turns(data)] == ["before", "AFTER the big one"]
    assert any("skipped 1 transcript line" in line for line in log_lines(data))
    talk.user("and later")
    hook("stop", event("s1", "Stop", path), data)
    assert turns(data)[-1]["content"] == "and later"


def test_cwd_and_skill_names_are_redacted(tmp_path: Path) -> None:
    data = tmp_path / "d"
    cwd = f"/work/{SECRET}/proj"
    hook("user-prompt", prompt("s1", "deploy it", cwd=cwd), data)
    path = tmp_path / "t.jsonl"
    talk = Transcript(path, "s1")
    talk.tool("Skill", {"skill": f"deploy-{SECRET}"})
    talk.user(f"/ship-it password={SECRET}")
    hook("stop", event("s1", "Stop", path, cwd=cwd), data)
    [turn, *_] = turns(data)
    assert SECRET not in turn["cwd"] and turn["cwd"].startswith("/work/")
    skills = [r["skill"] for r in JsonlLog(data, SKILL_USAGE).read() if "skill" in r]
    assert skills and not any(SECRET in s for s in skills)
    assert SECRET not in json.dumps(HookSessions(DataDir(data)).load("s1").cwd)
    for file in data.rglob("*"):
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file

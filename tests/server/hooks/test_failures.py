"""A hook never breaks the user's prompt: whatever goes wrong, it exits 0, prints nothing on
stdout (Claude Code would add it to the context) and says what happened in one line of the
bounded hooks.log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from filelock import FileLock

from dreamwell.stores import LongTermStore
from dreamwell.stores.hooks.sessions import HOOKS_LOG_MAX_BYTES, hooks_log
from dreamwell.stores.layout import DataDir
from tests.support.hooks import event, hook, log_lines, prompt, turns


def failed_quietly(done: object, data: Path, before: int, words: str) -> None:
    assert done.returncode == 0
    assert done.stdout == ""
    lines = log_lines(data)
    assert len(lines) == before + 1, lines
    assert words in lines[-1], lines[-1]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"{not json", "is not JSON"),
        (b"\xff\xfe garbage", "is not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"", "is not JSON"),
        (json.dumps({"prompt": "hi", "cwd": "/"}).encode(), "no 'session_id'"),
        (json.dumps({"session_id": "s1", "cwd": "/"}).encode(), "no 'prompt' text"),
        (json.dumps({"session_id": "s1", "prompt": 42}).encode(), "no 'prompt' text"),
    ],
)
def test_bad_hook_input_is_logged_and_prints_nothing(
    raw: bytes, words: str, tmp_path: Path
) -> None:
    failed_quietly(hook("user-prompt", raw, tmp_path), tmp_path, 0, words)
    assert turns(tmp_path) == []


def test_an_unreadable_transcript_is_logged_and_a_missing_one_is_nothing_to_read(
    tmp_path: Path,
) -> None:
    no_path = {"session_id": "s1", "cwd": "/"}  # Copilot's session end names none
    done = hook("session-end", no_path, tmp_path)
    assert (
        done.returncode == 0 and done.stdout == "" and "session-end ok" in log_lines(tmp_path)[-1]
    )
    missing = event("s1", "Stop", tmp_path / "nowhere.jsonl")  # a session that wrote none
    done = hook("stop", missing, tmp_path)  # (`claude mcp list`): nothing to read, no failure
    assert done.returncode == 0 and done.stdout == "" and "stop ok" in log_lines(tmp_path)[-1]
    folder = event("s1", "PreCompact", tmp_path)
    failed_quietly(hook("pre-compact", folder, tmp_path), tmp_path, 2, "is not a regular file")


def test_a_transcript_with_damaged_lines_keeps_the_good_ones(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = {"type": "user", "timestamp": "2026-11-26T00:00:01Z", "message": {"content": "hi there"}}
    path.write_text('{"type": "user", "mess\n' + json.dumps(good) + "\n[1]\n" + '{"half": ')
    done = hook("session-end", event("s1", "SessionEnd", path), tmp_path)
    assert done.returncode == 0 and done.stdout == ""
    assert [r["content"] for r in turns(tmp_path)] == ["hi there"]


def test_a_locked_log_is_logged_and_prints_nothing(tmp_path: Path) -> None:
    with FileLock(str(tmp_path / ".conversation.jsonl.lock")):
        done = hook("user-prompt", prompt("s1", "hello"), tmp_path)
    failed_quietly(done, tmp_path, 0, "locked by another process")


def test_a_full_disk_is_logged_and_prints_nothing(tmp_path: Path) -> None:
    (tmp_path / "conversation.jsonl").write_text("x" * 20_000 + "\n")
    done = hook("user-prompt", prompt("s1", "hello"), tmp_path, limit_file_size=16_000)
    failed_quietly(done, tmp_path, 0, "could not be written")


def test_a_damaged_index_and_snapshot_are_logged_and_the_log_still_searched(
    tmp_path: Path,
) -> None:
    store = LongTermStore(tmp_path)
    store.save("The deploy runs make deploy", category="ops")
    dirs = DataDir(tmp_path)
    dirs.hooks.mkdir()
    dirs.hook_entries.write_bytes(b"not a database at all" * 100)
    for path in dirs.index.iterdir():
        if path.is_file():
            path.write_bytes(b"\x00garbage")
    done = hook("user-prompt", prompt("s1", "how does the deploy run"), tmp_path)
    assert done.returncode == 0
    assert "make deploy" in done.stdout  # not yet checkpointed: found from the log
    logged = "\n".join(log_lines(tmp_path))
    assert "text index is unreadable" in logged and "snapshot is unreadable" in logged


def test_bad_settings_and_arguments_still_exit_0(tmp_path: Path) -> None:
    """A bad flag is refused (logged, exit 0); a bad variable takes its default and the hook
    works (issue 53 goal 6: one bad setting never switches memory off)."""
    env = {"XDG_DATA_HOME": str(tmp_path), "DREAMWELL_HOOK_MAX_CHARS": "lots"}
    variable = hook("user-prompt", prompt("s0", "hi"), tmp_path / "v", env=env)
    assert variable.returncode == 0 and "user-prompt ok" in log_lines(tmp_path / "v")[-1]
    env = {"XDG_DATA_HOME": str(tmp_path)}
    flags = ("--dream-auto-after", "soon")
    bad_setting = hook("user-prompt", prompt("s1", "hi"), tmp_path / "d", *flags, env=env)
    assert (bad_setting.returncode, bad_setting.stdout) == (0, "")
    no_event = hook(
        "no-such-event", prompt("s1", "hi"), tmp_path / "d", env={"XDG_DATA_HOME": str(tmp_path)}
    )
    assert (no_event.returncode, no_event.stdout) == (0, "")
    assert "bad settings" in log_lines(tmp_path / "d")[0]
    # issue 45: bad arguments are logged where --data-dir says, not in the default directory
    assert "bad arguments" in log_lines(tmp_path / "d")[1]
    assert not (tmp_path / "dreamwell").exists()
    bogus = hook("user-prompt", prompt("s1", "hi"), tmp_path / "e", "--bogus-flag", env=env)
    assert (bogus.returncode, bogus.stdout) == (0, "")
    assert "bad arguments" in log_lines(tmp_path / "e")[0]
    assert not (tmp_path / "dreamwell").exists()


def test_a_data_directory_that_is_a_file_exits_0_and_prints_nothing(tmp_path: Path) -> None:
    data = tmp_path / "file"
    data.write_text("x")
    done = hook("user-prompt", prompt("s1", "hi"), data)
    assert (done.returncode, done.stdout) == (0, "")


def test_hooks_log_is_bounded(tmp_path: Path) -> None:
    dirs = DataDir(tmp_path)
    for i in range(4000):
        hooks_log(dirs, f"line {i:05d} " + "y" * 100)
    lines = log_lines(tmp_path)
    assert dirs.hooks_log.stat().st_size <= HOOKS_LOG_MAX_BYTES + 200
    assert lines[-1].split()[2] == "03999" and all(line.count(" ") >= 2 for line in lines)
